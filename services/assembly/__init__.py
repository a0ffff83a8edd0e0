"""AssemblyService: the model's context within a token budget, explicit and fallback recall."""

from __future__ import annotations

from contextengine.v1 import assembly_pb2_grpc
from grpc import aio

from services.assembly.ports import AssemblyBackend
from services.assembly.servicer import AssemblyService
from services.assembly.summaries import OpenVikingSessionSummaries, SummarySource, stream_sessions
from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.stream_state import StreamStateStore
from shared.runtime.context import ServiceContext
from shared.runtime.server import ServiceSpec

SERVICE_NAME = "contextengine.v1.AssemblyService"

__all__ = [
    "SERVICE_NAME",
    "AssemblyBackend",
    "AssemblyService",
    "OpenVikingSessionSummaries",
    "SummarySource",
    "assembly_service_spec",
    "build_assembly_service",
]


def build_assembly_service(context: ServiceContext) -> ServiceSpec:
    """The AssemblyService for the runtime: summaries are the archive overviews of the stream's
    OpenViking sessions, as recorded in its engine state."""
    client = context.openviking
    store = StreamStateStore(DocumentStore(client))
    return assembly_service_spec(
        context.settings, client, OpenVikingSessionSummaries(client, stream_sessions(store))
    )


def assembly_service_spec(
    settings: Settings, openviking_client: AssemblyBackend, summaries: SummarySource
) -> ServiceSpec:
    """The AssemblyService over any backend and summary source."""
    servicer = AssemblyService(settings, openviking_client, summaries)

    def register(server: aio.Server) -> None:
        assembly_pb2_grpc.add_AssemblyServiceServicer_to_server(servicer, server)

    return ServiceSpec(name=SERVICE_NAME, register=register)
