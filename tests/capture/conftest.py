"""Capture services on real in-process gRPC servers, backed by the session's real OpenViking.

Each host runs the real CaptureService and, unless told otherwise, the real CompactionService
next to it (one process, the way `context-engine --service all` runs them): what a trigger or a
flush starts is observable as a real checkpoint and a real generation switch of the stream.
A host started with `compaction=False` points capture at a closed port (compaction down).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from contextengine.v1 import capture_pb2_grpc, checkpoint_pb2, common_pb2, compaction_pb2, compaction_pb2_grpc
from grpc import aio

from services.capture import build_capture_service
from services.compaction import build_compaction_service
from shared.config import Settings, load_settings
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.identity import RequestIdentity, parse_identity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.localstack.processes import free_port
from shared.openviking.client import OpenVikingClient
from shared.openviking.http import Middleware
from shared.runtime.context import ServiceContext, build_openviking_client
from shared.runtime.server import ServiceHost
from tests.support.call_log import CallLog
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint

_ids = itertools.count()


@dataclass
class CaptureHost:
    host: ServiceHost
    channel: aio.Channel
    stub: capture_pb2_grpc.CaptureServiceAsyncStub
    compaction: compaction_pb2_grpc.CompactionServiceAsyncStub
    """CompactionService of this host (answers only when the host runs it)."""
    openviking: OpenVikingClient
    settings: Settings

    async def close(self) -> None:
        await self.channel.close()
        await self.host.stop()


@dataclass
class CaptureStack:
    """Factory for capture hosts sharing one real OpenViking."""

    openviking: OpenVikingEndpoint
    hosts: list[CaptureHost] = field(default_factory=list)

    async def start(
        self,
        base_url: str | None = None,
        *,
        compaction: bool = True,
        middleware: Middleware | None = None,
        **overrides: object,
    ) -> CaptureHost:
        """Capture (+ the real CompactionService unless `compaction=False`) on port 0; its
        OpenViking requests go through `middleware` when given (e.g. a `CallLog`)."""
        dead_compaction = f"127.0.0.1:{free_port()}"
        settings = load_settings(
            environ={},
            overrides={
                "baseUrl": base_url or self.openviking.base_url,
                "grpcPort": 0,
                "shutdownGraceSeconds": 10,
                "timeoutMs": 60_000,
                **({} if compaction else {"compactionTarget": dead_compaction}),
                **overrides,
            },
        )
        ov = build_openviking_client(settings, middlewares=[middleware] if middleware else [])
        host_ref: list[ServiceHost] = []

        def compaction_target() -> str:
            return settings.compaction_target or host_ref[0].address

        context = ServiceContext(settings=settings, openviking=ov, compaction_target=compaction_target)
        # Capture first: its shutdown flush runs while this host's compaction still answers.
        specs = [build_capture_service(context)]
        if compaction:
            specs.append(build_compaction_service(context))
        host = ServiceHost(settings, specs, closers=[ov.aclose])
        host_ref.append(host)
        await host.start(0)
        channel = aio.insecure_channel(host.address)
        started = CaptureHost(
            host,
            channel,
            capture_pb2_grpc.CaptureServiceStub(channel),
            compaction_pb2_grpc.CompactionServiceStub(channel),
            ov,
            settings,
        )
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


def parsed(identity: common_pb2.Identity) -> RequestIdentity:
    return parse_identity(identity, default_agent_id="x", session_required=True)


async def stream_state(
    ov: OpenVikingClient, identity: common_pb2.Identity, *, settled: bool = True
) -> StreamState:
    """The engine's stream state as stored in OpenViking: once capture's release of the last
    turn is written (`settled`), or as it is right now."""
    states = StreamStateStore(DocumentStore(ov))
    if settled:
        return await settled_stream_state(states, parsed(identity))
    state = await states.load(parsed(identity))
    assert state is not None
    return state


async def checkpoint(
    ov: OpenVikingClient, identity: common_pb2.Identity, checkpoint_id: str
) -> CheckpointRecord:
    """A checkpoint document as stored in OpenViking (readable with no service running)."""
    record = await CheckpointStore(DocumentStore(ov)).read(parsed(identity).tenant, checkpoint_id)
    assert record is not None, checkpoint_id
    return record


async def settled_checkpoint(
    host: CaptureHost, identity: common_pb2.Identity, checkpoint_id: str, *, within: float = 90.0
) -> checkpoint_pb2.CompactCheckpoint:
    """GetCheckpoint until the checkpoint is COMPLETED or FAILED (the commit runs in the background)."""
    give_up = time.monotonic() + within
    while True:
        got = await host.compaction.GetCheckpoint(
            compaction_pb2.GetCheckpointRequest(identity=identity, checkpoint_id=checkpoint_id), timeout=60
        )
        terminal = (checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED, checkpoint_pb2.CHECKPOINT_STATUS_FAILED)
        if got.checkpoint.status in terminal:
            return got.checkpoint
        assert time.monotonic() < give_up, f"{checkpoint_id} still {got.checkpoint.status}"
        await asyncio.sleep(0.25)


@pytest.fixture
def settings(openviking: OpenVikingEndpoint) -> Settings:
    """The engine's settings against the session's OpenViking."""
    return load_settings(environ={}, overrides={"baseUrl": openviking.base_url})


@pytest.fixture
async def ov(settings: Settings) -> AsyncIterator[OpenVikingClient]:
    async with build_openviking_client(settings) as client:
        yield client


@pytest.fixture
async def held(settings: Settings) -> AsyncIterator[tuple[CallLog, OpenVikingClient]]:
    """A link to OpenViking holding every request until `let_go`."""
    log = CallLog()
    log.hold_after(0)
    async with build_openviking_client(settings, middlewares=[log]) as client:
        yield log, client


@pytest.fixture
async def logged(settings: Settings) -> AsyncIterator[tuple[CallLog, OpenVikingClient]]:
    """A link to OpenViking noting every request."""
    log = CallLog()
    async with build_openviking_client(settings, middlewares=[log]) as client:
        yield log, client


@pytest.fixture
async def capture_stack(openviking: OpenVikingEndpoint) -> AsyncIterator[CaptureStack]:
    stack = CaptureStack(openviking)
    try:
        yield stack
    finally:
        for host in stack.hosts:
            await host.close()


StartHost = Callable[..., Awaitable[CaptureHost]]
