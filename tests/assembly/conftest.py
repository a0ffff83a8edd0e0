from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
from contextengine.v1 import assembly_pb2_grpc
from grpc import aio

from services.assembly import AssemblyBackend, SummarySource, build_assembly_service
from shared.config import Settings
from shared.runtime.server import ServiceHost


@asynccontextmanager
async def assembly_stub(
    settings: Settings, backend: AssemblyBackend, summaries: SummarySource | None = None
) -> AsyncIterator[Any]:
    """AssemblyService on a real in-process gRPC server (port 0), and a stub connected to it."""
    host = ServiceHost(settings, [build_assembly_service(settings, backend, summaries)])
    port = await host.start(port=0)
    channel = aio.insecure_channel(f"{settings.grpc_host}:{port}")
    try:
        yield assembly_pb2_grpc.AssemblyServiceStub(channel)
    finally:
        await channel.close()
        await host.stop()


def status_of(error: BaseException) -> grpc.StatusCode:
    assert isinstance(error, aio.AioRpcError)
    return error.code()
