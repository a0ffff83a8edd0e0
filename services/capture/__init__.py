"""CaptureService: lossless turn persistence, compaction triggers, explicit memories (issue 4)."""

from __future__ import annotations

import asyncio
import importlib
import logging

from contextengine.v1 import capture_pb2_grpc
from grpc import aio

from services.capture.compaction_client import CompactionStarter
from services.capture.servicer import CaptureServicer
from services.capture.transcript import TranscriptWriter
from services.capture.triggers import TriggerThresholds
from services.capture.turns import InflightConfirmer, TurnCapture
from shared.domain.documents import DocumentStore
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import ServiceContext
from shared.runtime.server import ServiceSpec

SERVICE_NAME = "contextengine.v1.CaptureService"

log = logging.getLogger(__name__)

__all__ = ["SERVICE_NAME", "build_capture_service"]


def _inflight_confirmer(openviking: OpenVikingClient) -> InflightConfirmer | None:
    """The compaction side's `finalise_inflight` (shared.domain.checkpoints), when present."""
    try:
        checkpoints = importlib.import_module("shared.domain.checkpoints")
    except ImportError:
        return None
    finalise_inflight = getattr(checkpoints, "finalise_inflight", None)
    if finalise_inflight is None:
        return None

    async def confirm(identity: RequestIdentity, state: StreamState, deadline: float | None) -> None:
        await finalise_inflight(openviking, identity, state.inflight, deadline=deadline)

    return confirm


def build_capture_service(context: ServiceContext) -> ServiceSpec:
    settings = context.settings
    states = StreamStateStore(DocumentStore(context.openviking))
    compactions = CompactionStarter(context.compaction_target, context.client_interceptors)
    turns = TurnCapture(
        states,
        TranscriptWriter(context.openviking, states),
        compactions,
        TriggerThresholds.from_settings(settings),
        default_encoding=settings.default_encoding,
        capture_max_length=settings.capture_max_length,
        confirm_inflight=_inflight_confirmer(context.openviking),
        index=TurnIndexWriter(context.openviking),
    )
    servicer = CaptureServicer(settings, context.openviking, turns)

    def register(server: aio.Server) -> None:
        capture_pb2_grpc.add_CaptureServiceServicer_to_server(servicer, server)

    async def flush_on_shutdown() -> None:
        """Commit every stream this replica touched that still has uncommitted turns."""
        streams = list(turns.known.by_stream.values())
        if streams:
            log.info("flushing %d stream(s) on shutdown", len(streams))
            try:
                await asyncio.wait_for(
                    turns.flush(streams), timeout=max(1.0, settings.shutdown_grace_seconds)
                )
            except Exception:  # shutdown goes on; failures are logged per stream
                log.warning("shutdown flush incomplete", exc_info=True)
        await compactions.close()

    return ServiceSpec(name=SERVICE_NAME, register=register, on_shutdown=(flush_on_shutdown,))
