"""CompactionService on real in-process gRPC servers, and turns written the way capture writes them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2, compaction_pb2_grpc, envelope_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from grpc import aio

from services.compaction import build_compaction_service
from shared.config import Settings, load_settings
from shared.domain.documents import DocumentStore
from shared.domain.envelope import PersistedTurn, openviking_message, turn_envelope, turn_id_for
from shared.domain.identity import RequestIdentity, parse_identity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.openviking import DevAuth, OpenVikingClient
from shared.openviking.http import Middleware
from shared.runtime.context import ServiceContext
from shared.runtime.server import ServiceHost


def settings_for(base_url: str, **overrides: object) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "baseUrl": base_url,
            "shutdownGraceSeconds": 0.1,
            "memoryExpandMaxResults": 50,
            "recentRawTurnCount": 4,
            "compactTaskTimeoutMs": 150_000,
            "timeoutMs": 60_000,
            **overrides,
        },
    )


@dataclass
class Replica:
    """One CompactionService replica: its host, client and a connected stub."""

    host: ServiceHost
    openviking: OpenVikingClient
    channel: aio.Channel
    stub: compaction_pb2_grpc.CompactionServiceStub

    async def stop(self) -> None:
        await self.channel.close()
        await self.host.stop()


async def start_replica(settings: Settings, middlewares: Sequence[Middleware] = ()) -> Replica:
    client = OpenVikingClient(settings.base_url, DevAuth(), middlewares=middlewares)
    context = ServiceContext(settings=settings, openviking=client, compaction_target=lambda: "")
    host = ServiceHost(settings, [build_compaction_service(context)], closers=[client.aclose])
    port = await host.start(port=0)
    channel = aio.insecure_channel(f"{settings.grpc_host}:{port}")
    return Replica(host, client, channel, compaction_pb2_grpc.CompactionServiceStub(channel))


@asynccontextmanager
async def replica(settings: Settings, middlewares: Sequence[Middleware] = ()) -> AsyncIterator[Replica]:
    running = await start_replica(settings, middlewares)
    try:
        yield running
    finally:
        await running.stop()


def status_of(error: BaseException) -> grpc.StatusCode:
    assert isinstance(error, aio.AioRpcError)
    return error.code()


def message(role: common_pb2.MessageRole, text: str, sequence: int) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=f"m-{sequence}",
        role=role,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
        timestamp=Timestamp(seconds=1_760_000_000 + sequence),
        host_fields=common_pb2.JsonValue(json='{"provider":"test"}'),
    )


def conversation(lines: Sequence[str], start: int = 0) -> list[common_pb2.ConversationMessage]:
    """Alternating user/assistant messages numbered from `start`."""
    roles = (common_pb2.MESSAGE_ROLE_USER, common_pb2.MESSAGE_ROLE_ASSISTANT)
    return [message(roles[(start + i) % 2], text, start + i) for i, text in enumerate(lines)]


def request_identity(proto: common_pb2.Identity) -> RequestIdentity:
    return parse_identity(proto, default_agent_id="default", session_required=True)


class StreamWriter:
    """Appends host messages to a stream as capture does (claim positions, then append)."""

    def __init__(self, openviking: OpenVikingClient, identity: common_pb2.Identity) -> None:
        self._ov = openviking
        self.identity = request_identity(identity)
        self._states = StreamStateStore(DocumentStore(openviking))
        self.written: list[common_pb2.ConversationMessage] = []

    async def state(self) -> StreamState:
        state = await self._states.load(self.identity)
        assert state is not None
        return state

    async def append(self, messages: Sequence[common_pb2.ConversationMessage]) -> None:
        claimed: list[tuple[int, str]] = []

        def claim(state: StreamState) -> StreamState:
            start = state.last_sequence + 1
            claimed[:] = [(start, state.active_session)]
            state.last_sequence = start + len(messages) - 1
            state.turns_since_compaction += len(messages)
            state.active_tokens += 10 * len(messages)
            return state

        await self._states.update(self.identity, claim)
        start, session = claimed[0]
        stream = self.identity.stream_id
        await self._ov.add_messages(
            self.identity.tenant,
            session,
            [openviking_message(stream, start + i, m) for i, m in enumerate(messages)],
        )
        self.written += messages

    def envelope(self, sequence: int, session_id: str) -> envelope_pb2.TurnEnvelope:
        """The exact TurnEnvelope of the message written at `sequence`."""
        original = self.written[sequence]
        turn = PersistedTurn(turn_id_for(self.identity.stream_id, sequence, original), sequence, original)
        return turn_envelope(turn, openviking_session_id=session_id, agent_id=self.identity.agent_id)


async def settled(
    stub: compaction_pb2_grpc.CompactionServiceStub,
    identity: common_pb2.Identity,
    checkpoint_id: str,
    *,
    within: float = 180.0,
) -> checkpoint_pb2.CompactCheckpoint:
    """GetCheckpoint until COMPLETED or FAILED (a hand-off is owned and finished in the background)."""
    give_up = time.monotonic() + within
    terminal = (checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED, checkpoint_pb2.CHECKPOINT_STATUS_FAILED)
    while True:
        got = await stub.GetCheckpoint(
            compaction_pb2.GetCheckpointRequest(identity=identity, checkpoint_id=checkpoint_id), timeout=60
        )
        if got.checkpoint.status in terminal:
            return got.checkpoint
        assert time.monotonic() < give_up, f"{checkpoint_id} still pending: {got.checkpoint}"
        await asyncio.sleep(0.25)


def compact_request(
    identity: common_pb2.Identity, *, background: bool = False, force: bool = True
) -> compaction_pb2.CompactRequest:
    """A host's Compact; forced by default: the tests' sessions are below every threshold."""
    return compaction_pb2.CompactRequest(
        identity=identity,
        background=background,
        force=force,
        trigger=checkpoint_pb2.COMPACTION_TRIGGER_HOST_REQUEST,
    )
