"""CaptureService: lossless turn persistence, compaction triggers, explicit memories (issue 4)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from contextengine.v1 import capture_pb2
from grpc import aio

from services.capture.backlog import CaptureBackground, IndexBacklog
from services.capture.compaction_client import CompactionNudger
from services.capture.index_ledger import IndexLedger
from services.capture.request_wire import AFTER_TURN_WIRE
from services.capture.servicer import CaptureServicer
from services.capture.transcript import TranscriptWriter
from services.capture.triggers import TriggerThresholds
from services.capture.turns import TurnCapture
from shared.domain.documents import DocumentStore
from shared.domain.stream_state import StreamStateStore
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.runtime.context import ServiceContext
from shared.runtime.handlers import add_unary_service
from shared.runtime.server import ServiceSpec
from shared.telemetry.metrics import watch_background

SERVICE_NAME = "contextengine.v1.CaptureService"

log = logging.getLogger(__name__)

__all__ = ["SERVICE_NAME", "build_capture_service"]


def build_capture_service(context: ServiceContext) -> ServiceSpec:
    settings = context.settings
    states = StreamStateStore(DocumentStore(context.openviking))
    nudger = CompactionNudger(
        context.compaction_target, context.client_interceptors, local=context.in_process
    )
    index_writer = TurnIndexWriter(context.openviking)
    ledger = IndexLedger(
        context.openviking, index_writer, recover_after=settings.turn_index_recover_after_ms / 1000
    )
    writer = TranscriptWriter(context.openviking, states, ledger=ledger)
    index = IndexBacklog(index_writer, coalesce=settings.turn_index_coalesce_ms / 1000)
    turns = TurnCapture(
        states,
        writer,
        nudger,
        TriggerThresholds.from_settings(settings),
        default_encoding=settings.default_encoding,
        capture_max_length=settings.capture_max_length,
        index=index,
        ledger=ledger,
    )
    background = CaptureBackground(index, lambda: writer.running, lambda: nudger.pending)
    watch_background(background)
    servicer = CaptureServicer(settings, context.openviking, turns, context.in_process.memory_changes)

    def register(server: aio.Server) -> None:
        # AfterTurn takes its host messages as wire bytes: only new messages are decoded.
        add_unary_service(
            server,
            capture_pb2.DESCRIPTOR.services_by_name["CaptureService"],
            servicer,
            {"AfterTurn": (servicer.after_turn_wire, AFTER_TURN_WIRE.parse)},
        )

    async def flush_on_shutdown() -> None:
        """Finish the appends (and releases, index writes) this replica owns, then hand off a
        compaction of every stream it touched that still has uncommitted turns, and deliver the
        nudges - within the grace."""
        grace = max(1.0, settings.shutdown_grace_seconds)
        deadline = time.monotonic() + grace
        try:
            await asyncio.wait_for(writer.drain(), timeout=grace / 2)
        except TimeoutError:
            log.warning("%d append(s) still running at shutdown; their claims get repaired", writer.running)
        try:
            await asyncio.wait_for(index.drain(), timeout=max(0.5, deadline - time.monotonic()))
        except TimeoutError:
            log.warning("%d exchange(s) left unindexed; another replica re-indexes them", index.depth)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ledger.drain(), timeout=max(0.5, deadline - time.monotonic()))
        streams = list(turns.known.by_stream.values())
        if streams:
            log.info("handing off %d stream(s) on shutdown", len(streams))
            try:
                await asyncio.wait_for(turns.flush(streams), timeout=max(0.5, deadline - time.monotonic()))
            except Exception:  # shutdown goes on; failures are logged per stream
                log.warning("shutdown hand-off incomplete", exc_info=True)
        try:
            await asyncio.wait_for(nudger.drain(), timeout=max(0.5, deadline - time.monotonic()))
        except TimeoutError:
            log.warning("%d nudge(s) undelivered; the compaction sweep resumes them", nudger.pending)
        await nudger.close()
        try:
            await asyncio.wait_for(servicer.learning.drain(), timeout=max(0.5, deadline - time.monotonic()))
        except TimeoutError:
            log.warning("skill/tool lessons unfinished at shutdown; those turns teach nothing")

    return ServiceSpec(
        name=SERVICE_NAME,
        register=register,
        on_shutdown=(flush_on_shutdown,),
        needs_backend=True,
        behind=background.behind,  # (also what keeps `background` watched: the gauges hold it weakly)
    )
