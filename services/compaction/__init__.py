"""CompactionService: OpenViking commit as the formal sync point, checkpoints, memory_expand."""

from __future__ import annotations

from contextengine.v1 import compaction_pb2_grpc
from grpc import aio

from services.compaction.compact import Compactor
from services.compaction.expand import Expander
from services.compaction.servicer import CompactionServicer
from services.compaction.worker import PHASE2_WAIT_FACTOR, CompactionWorker
from shared.runtime.context import ServiceContext
from shared.runtime.server import ServiceSpec

SERVICE_NAME = "contextengine.v1.CompactionService"


def build_compaction_service(
    context: ServiceContext, *, enable_working_memory: bool | None = True
) -> ServiceSpec:
    """The service spec. `enable_working_memory` is sent with every commit: True asks OpenViking
    for an archive summary (an LLM's, or a fallback the engine ignores when there is no LLM)."""
    settings = context.settings
    worker = CompactionWorker(
        context.openviking,
        enable_working_memory=enable_working_memory,
        phase2_wait_seconds=settings.compact_task_timeout_ms / 1000.0 * PHASE2_WAIT_FACTOR,
        summary_max_tokens=settings.compact_summary_max_tokens,
        encoding=settings.default_encoding,
        shutdown_wait_seconds=settings.shutdown_grace_seconds / 2,
        memory_changes=context.in_process.memory_changes,
    )
    context.in_process.own_hand_offs = worker.own_stream
    compactor = Compactor(settings, context.openviking, worker)
    expander = Expander(context.openviking, settings.memory_expand_max_results)
    servicer = CompactionServicer(settings, context.openviking, compactor, expander, worker)

    def register(server: aio.Server) -> None:
        compaction_pb2_grpc.add_CompactionServiceServicer_to_server(servicer, server)

    return ServiceSpec(
        name=SERVICE_NAME, register=register, on_shutdown=(worker.shutdown,), needs_backend=True
    )


__all__ = ["SERVICE_NAME", "build_compaction_service"]
