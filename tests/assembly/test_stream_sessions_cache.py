"""An assembly replica reads a stream's state (which checkpoints it has) once per TTL, and again
at once when a commit in its own process announces the tenant, and not for a stream its recent
listing of the user's turn index never held; against the real OpenViking."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from contextengine.v1 import assembly_pb2, capture_pb2, capture_pb2_grpc, common_pb2
from grpc import aio
from hypothesis import given
from hypothesis import strategies as st

from services.assembly import assembly_servicer
from services.assembly.summaries import (
    STREAM_SESSIONS_TTL_SECONDS,
    CheckpointSummaries,
    stream_checkpoints,
    stream_checkpoints_cache,
)
from shared.config import load_settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.identity import request_identity
from shared.domain.memory_changes import MemoryChanges
from shared.domain.stream_state import StreamStateStore, session_id_for, stream_of_session
from shared.domain.turn_index_folders import turn_index_folders
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.runtime.main import start_host
from tests.assembly.helpers import assistant, unique_tenant, user
from tests.support.stack import OpenVikingEndpoint

STATE_READ = "/api/v1/content/read"
STATE_FILE = "/state.json"


class _NoDeadline:
    def time_remaining(self) -> float | None:
        return None


def _identity(tenant: Tenant) -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=tenant.account_id, user_id=tenant.user_id, agent_id="main", session_id=uuid.uuid4().hex[:8]
    )


class StateReads:
    """HTTP middleware counting reads of a stream's state document (the profile is another file)."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        if request.path == STATE_READ and any(
            k == "uri" and v.endswith(STATE_FILE) for k, v in request.query
        ):
            self.count += 1
        return await send(request)

    def taken(self) -> int:
        """Reads since the last call."""
        count, self.count = self.count, 0
        return count


async def _captured_stream(base_url: str, who: common_pb2.Identity) -> None:
    """A stream with a stored state: one turn captured by the real capture service."""
    settings = load_settings(
        environ={}, overrides={"baseUrl": base_url, "grpcPort": 0, "shutdownGraceSeconds": 0.1}
    )
    host = await start_host(settings, "capture", port=0)
    try:
        async with aio.insecure_channel(host.address) as channel:
            await capture_pb2_grpc.CaptureServiceStub(channel).AfterTurn(
                capture_pb2.AfterTurnRequest(identity=who, messages=[user("hello there"), assistant("hi")]),
                timeout=60,
            )
    finally:
        await host.stop()


@given(
    stream=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_g", min_size=1, max_size=40),
    generation=st.integers(min_value=0, max_value=10**6),
)
def test_a_session_id_names_its_stream_whatever_the_stream_id_holds(stream: str, generation: int) -> None:
    assert stream_of_session(session_id_for(stream, generation)) == stream
    assert stream_of_session(stream) is None or stream.startswith("ce-")


@pytest.mark.stack
async def test_the_state_is_read_once_per_ttl(openviking: OpenVikingEndpoint) -> None:
    who = _identity(unique_tenant("sessttl"))
    await _captured_stream(openviking.base_url, who)
    identity = request_identity(
        who, load_settings(environ={}, overrides={"baseUrl": openviking.base_url}), session_required=True
    )
    now = [0.0]
    state_reads = StateReads()
    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[state_reads]) as client:
        cache = stream_checkpoints_cache(clock=lambda: now[0])
        documents = DocumentStore(client)
        summaries = CheckpointSummaries(
            CheckpointStore(documents), stream_checkpoints(StreamStateStore(documents), cache)
        )
        reads = []
        for elapsed in (0.0, 1.0, STREAM_SESSIONS_TTL_SECONDS - 1.0, STREAM_SESSIONS_TTL_SECONDS + 1.0):
            now[0] = elapsed
            await summaries.latest_summaries(identity, time.monotonic() + 30)
            reads.append(state_reads.taken())
    assert reads == [1, 0, 0, 1]


@pytest.mark.stack
async def test_a_commit_in_the_same_process_drops_only_its_tenants_streams(
    openviking: OpenVikingEndpoint,
) -> None:
    """The servicer as the runtime builds it: two streams of two tenants, each read once; a
    change announced for one tenant makes only its stream's state be read again."""
    alice, bob = _identity(unique_tenant("sessa")), _identity(unique_tenant("sessb"))
    for who in (alice, bob):
        await _captured_stream(openviking.base_url, who)
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    changes = MemoryChanges()
    state_reads = StateReads()

    async def reads_of(who: common_pb2.Identity) -> int:
        request = assembly_pb2.AssembleRequest(
            identity=who, messages=[user("which editor do I prefer for rust")], token_budget=4000
        )
        await servicer.Assemble(request, _NoDeadline())  # type: ignore[arg-type]
        return state_reads.taken()

    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[state_reads]) as client:
        servicer = assembly_servicer(settings, client, changes)
        first = [await reads_of(alice), await reads_of(bob), await reads_of(alice), await reads_of(bob)]
        changes.changed(request_identity(alice, settings, session_required=True).tenant)
        after_change = [await reads_of(alice), await reads_of(bob), await reads_of(alice)]
    assert first == [1, 1, 0, 0]
    assert after_change == [1, 0, 0]


@pytest.mark.stack
async def test_no_state_is_read_for_a_stream_the_listed_turn_index_never_held(
    openviking: OpenVikingEndpoint,
) -> None:
    """Once the replica's exchange index has listed the user's turn index, a new stream's first
    Assemble (nothing before the prompt) reads no state; a stream the listing holds is read as
    before, and so is a call with a host transcript, and any stream once a change is announced
    in the process (until the next listing)."""
    captured = _identity(unique_tenant("neverix"))
    await _captured_stream(openviking.base_url, captured)
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    tenant = request_identity(captured, settings, session_required=True).tenant
    async with OpenVikingClient(openviking.base_url, DevAuth()) as plain:
        give_up = time.monotonic() + 30
        while not await turn_index_folders(plain, tenant):  # capture's turn index written
            assert time.monotonic() < give_up
            await asyncio.sleep(0.2)
    changes = MemoryChanges()
    state_reads = StateReads()

    async def reads_of(who: common_pb2.Identity, *earlier: common_pb2.ConversationMessage) -> int:
        request = assembly_pb2.AssembleRequest(
            identity=who, messages=[*earlier, user("what did I say about the weather")], token_budget=4000
        )
        await servicer.Assemble(request, _NoDeadline())  # type: ignore[arg-type]
        return state_reads.taken()

    def new_stream() -> common_pb2.Identity:
        return _identity(tenant)

    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[state_reads]) as client:
        servicer = assembly_servicer(settings, client, changes)
        assert await reads_of(new_stream()) == 1  # nothing listed yet; recall's search starts the sync
        give_up = time.monotonic() + 30
        while await reads_of(new_stream()):
            assert time.monotonic() < give_up
            await asyncio.sleep(0.2)
        listed = [await reads_of(new_stream()), await reads_of(captured), await reads_of(captured)]
        # A host transcript before the prompt: the stream goes on, whatever the listing says.
        going_on = await reads_of(new_stream(), user("hello there"), assistant("hi"))
        changes.changed(tenant)
        after_change = await reads_of(new_stream())
        await servicer.aclose()
    assert listed == [0, 1, 0]  # the captured stream is read (then cached), a new one is not
    assert going_on == 1
    assert after_change == 1
