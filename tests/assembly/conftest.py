from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from contextengine.v1 import assembly_pb2_grpc
from grpc import aio

from services.assembly import CheckpointSummaries, assembly_service_spec, runtime_assembly_spec
from services.assembly.summaries import stream_checkpoints
from shared.config import Settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.stream_state import StreamStateStore
from shared.openviking import DevAuth
from shared.openviking.client import OpenVikingClient
from shared.runtime.server import ServiceHost
from tests.assembly.helpers import RequestRecorder
from tests.support.stack import OpenVikingEndpoint


@pytest.fixture
async def recorded_client(
    openviking: OpenVikingEndpoint,
) -> AsyncIterator[tuple[OpenVikingClient, RequestRecorder]]:
    """A client of the session's real OpenViking, and the requests it sent."""
    recorder = RequestRecorder()
    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[recorder]) as ov:
        yield ov, recorder


@asynccontextmanager
async def assembly_channel(
    settings: Settings, backend: OpenVikingClient, *, as_deployed: bool = False
) -> AsyncIterator[aio.Channel]:
    """AssemblyService on a real in-process gRPC server (port 0), and a channel connected to it.

    Its summaries are the real ones: those of the stream's checkpoints, read on every call, or
    `as_deployed` as the runtime reads them (cached per stream, not read for a stream the exchange
    index's listing never held).
    """
    if as_deployed:
        spec = runtime_assembly_spec(settings, backend)
    else:
        documents = DocumentStore(backend)
        summaries = CheckpointSummaries(
            CheckpointStore(documents), stream_checkpoints(StreamStateStore(documents))
        )
        spec = assembly_service_spec(settings, backend, summaries)
    host = ServiceHost(settings, [spec])
    port = await host.start(port=0)
    channel = aio.insecure_channel(f"{settings.grpc_host}:{port}")
    try:
        yield channel
    finally:
        await channel.close()
        await host.stop()


@asynccontextmanager
async def assembly_stub(
    settings: Settings, backend: OpenVikingClient, *, as_deployed: bool = False
) -> AsyncIterator[Any]:
    """A stub of the AssemblyService served as `assembly_channel` serves it."""
    async with assembly_channel(settings, backend, as_deployed=as_deployed) as channel:
        yield assembly_pb2_grpc.AssemblyServiceStub(channel)


def status_of(error: BaseException) -> grpc.StatusCode:
    assert isinstance(error, aio.AioRpcError)
    return error.code()
