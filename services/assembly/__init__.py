"""AssemblyService: the model's context within a token budget, explicit and fallback recall."""

from __future__ import annotations

from contextengine.v1 import assembly_pb2_grpc
from grpc import aio

from services.assembly.ports import AssemblyBackend
from services.assembly.servicer import AssemblyService
from services.assembly.summaries import OpenVikingSessionSummaries, SummarySource
from shared.config import Settings
from shared.runtime.server import ServiceSpec

SERVICE_NAME = "contextengine.v1.AssemblyService"

__all__ = [
    "SERVICE_NAME",
    "AssemblyBackend",
    "AssemblyService",
    "OpenVikingSessionSummaries",
    "SummarySource",
    "build_assembly_service",
]


def build_assembly_service(
    settings: Settings, openviking_client: AssemblyBackend, summaries: SummarySource | None = None
) -> ServiceSpec:
    """The AssemblyService for the runtime; summaries default to OpenViking session overviews."""
    servicer = AssemblyService(
        settings, openviking_client, summaries or OpenVikingSessionSummaries(openviking_client)
    )

    def register(server: aio.Server) -> None:
        assembly_pb2_grpc.add_AssemblyServiceServicer_to_server(servicer, server)

    return ServiceSpec(name=SERVICE_NAME, register=register)
