"""Capture services on real in-process gRPC servers, backed by the session's real OpenViking.

CompactionService is a recording stand-in here (a real gRPC server that answers PENDING
checkpoints): these tests are about what capture asks for, not what compaction does.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from contextengine.v1 import (
    capture_pb2_grpc,
    checkpoint_pb2,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)
from grpc import aio

from services.capture import build_capture_service
from shared.config import Settings, load_settings
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import ServiceContext, build_openviking_client
from shared.runtime.server import ServiceHost, ServiceSpec
from tests.support.stack import OpenVikingEndpoint

_ids = itertools.count()


class RecordingCompaction(compaction_pb2_grpc.CompactionServiceServicer):
    """Stand-in CompactionService: records each Compact and answers with a PENDING checkpoint."""

    def __init__(self) -> None:
        self.calls: list[compaction_pb2.CompactRequest] = []
        self.fail = False

    async def Compact(  # noqa: N802
        self, request: compaction_pb2.CompactRequest, context: aio.ServicerContext[Any, Any]
    ) -> compaction_pb2.CompactResponse:
        if self.fail:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "compaction down")
        self.calls.append(request)
        checkpoint = checkpoint_pb2.CompactCheckpoint(
            checkpoint_id=f"cp-{len(self.calls)}",
            status=checkpoint_pb2.CHECKPOINT_STATUS_PENDING,
            trigger=request.trigger,
            host_session_id=request.identity.session_id,
        )
        return compaction_pb2.CompactResponse(ok=True, compacted=True, checkpoint=checkpoint)


@dataclass
class CaptureHost:
    host: ServiceHost
    channel: aio.Channel
    stub: capture_pb2_grpc.CaptureServiceAsyncStub
    openviking: OpenVikingClient
    settings: Settings
    spec: ServiceSpec

    async def close(self) -> None:
        await self.channel.close()
        await self.host.stop()


@dataclass
class CaptureStack:
    """Factory for capture hosts sharing one OpenViking and one recording compaction."""

    openviking: OpenVikingEndpoint
    compaction: RecordingCompaction
    compaction_address: str
    hosts: list[CaptureHost] = field(default_factory=list)

    async def start(self, base_url: str | None = None, **overrides: object) -> CaptureHost:
        settings = load_settings(
            environ={},
            overrides={
                "baseUrl": base_url or self.openviking.base_url,
                "grpcPort": 0,
                "shutdownGraceSeconds": 2,
                "timeoutMs": 60_000,
                **overrides,
            },
        )
        ov = build_openviking_client(settings)
        context = ServiceContext(
            settings=settings, openviking=ov, compaction_target=lambda: self.compaction_address
        )
        spec = build_capture_service(context)
        host = ServiceHost(settings, [spec], closers=[ov.aclose])
        await host.start(0)
        channel = aio.insecure_channel(host.address)
        started = CaptureHost(host, channel, capture_pb2_grpc.CaptureServiceStub(channel), ov, settings, spec)
        self.hosts.append(started)
        return started


def new_identity(user: str = "", session: str = "") -> common_pb2.Identity:
    n = next(_ids)
    return common_pb2.Identity(
        account_id="acme",
        user_id=user or f"u{n}-{uuid.uuid4().hex[:6]}",
        agent_id="helper",
        session_id=session or f"host-s{n}-{uuid.uuid4().hex[:6]}",
    )


@pytest.fixture
async def capture_stack(openviking: OpenVikingEndpoint) -> AsyncIterator[CaptureStack]:
    recorder = RecordingCompaction()  # type: ignore[abstract]  # only Compact is needed
    server = aio.server()
    compaction_pb2_grpc.add_CompactionServiceServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    stack = CaptureStack(openviking, recorder, f"127.0.0.1:{port}")
    try:
        yield stack
    finally:
        for host in stack.hosts:
            await host.close()
        await server.stop(None)


StartHost = Callable[..., Awaitable[CaptureHost]]
