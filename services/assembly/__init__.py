"""AssemblyService: the model's context within a token budget, explicit and fallback recall."""

from __future__ import annotations

from contextengine.v1 import assembly_pb2
from grpc import aio

from services.assembly.exchange_index import ExchangeIndex
from services.assembly.ports import AssemblyBackend
from services.assembly.request_wire import ASSEMBLE_WIRE
from services.assembly.servicer import AssemblyService
from services.assembly.summaries import (
    CheckpointSummaries,
    SummarySource,
    stream_checkpoints,
    stream_checkpoints_cache,
)
from shared.config import Settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.memory_changes import MemoryChanges
from shared.domain.stream_state import StreamStateStore
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import ServiceContext
from shared.runtime.handlers import add_unary_service
from shared.runtime.server import ServiceSpec

SERVICE_NAME = "contextengine.v1.AssemblyService"

__all__ = [
    "SERVICE_NAME",
    "AssemblyBackend",
    "AssemblyService",
    "CheckpointSummaries",
    "SummarySource",
    "assembly_service_spec",
    "assembly_servicer",
    "build_assembly_service",
    "runtime_assembly_spec",
]


def build_assembly_service(context: ServiceContext) -> ServiceSpec:
    """The AssemblyService for the runtime: summaries are those of the stream's checkpoints, as
    listed in its engine state."""
    return _spec(assembly_servicer(context.settings, context.openviking, context.in_process.memory_changes))


def assembly_servicer(
    settings: Settings, client: OpenVikingClient, memory_changes: MemoryChanges | None = None
) -> AssemblyService:
    """The servicer over OpenViking, its summaries read from the stream's checkpoints (not for a
    stream the exchange index's listing shows was never indexed); cached profiles, streams'
    checkpoint lists and the listing's word dropped on `memory_changes`."""
    documents = DocumentStore(client)
    checkpoints = stream_checkpoints_cache()
    if memory_changes is not None:
        memory_changes.subscribe(checkpoints.invalidate)
    exchanges = ExchangeIndex(client)
    summaries = CheckpointSummaries(
        CheckpointStore(documents), stream_checkpoints(StreamStateStore(documents), checkpoints, exchanges)
    )
    return AssemblyService(settings, client, summaries, memory_changes, exchanges)


def assembly_service_spec(
    settings: Settings, openviking_client: AssemblyBackend, summaries: SummarySource
) -> ServiceSpec:
    """The AssemblyService over any backend and summary source."""
    return _spec(AssemblyService(settings, openviking_client, summaries))


def runtime_assembly_spec(settings: Settings, client: OpenVikingClient) -> ServiceSpec:
    """The AssemblyService as the runtime builds it over OpenViking (`assembly_servicer`)."""
    return _spec(assembly_servicer(settings, client))


def _spec(servicer: AssemblyService) -> ServiceSpec:
    def register(server: aio.Server) -> None:
        # Assemble takes its host messages as wire bytes: only new messages are decoded.
        add_unary_service(
            server,
            assembly_pb2.DESCRIPTOR.services_by_name["AssemblyService"],
            servicer,
            {"Assemble": (servicer.assemble_wire, ASSEMBLE_WIRE.parse)},
        )

    return ServiceSpec(name=SERVICE_NAME, register=register, on_shutdown=(servicer.aclose,))
