"""A document whose creation was left unfinished is taken over, and no stored document is ever
overwritten by a creation (`shared.domain.document_slots`): a stream's state, a checkpoint.

The failure this guards against was found by the chaos run: the replica whose `mkdir` of a new
stream's directory won had its state write fail (OpenViking restarting), and every later call of
that stream waited for a state nobody would write. Here the dead creator is played by a `mkdir`
of the stream directory with no state written, against the real OpenViking.
"""

from __future__ import annotations

import asyncio
import random

import grpc
import pytest
from grpc import aio

from shared.config import load_settings
from shared.domain import document_slots
from shared.domain import documents as documents_module
from shared.domain.document_slots import DocumentSlots, stream_dir, stream_state_layout
from shared.domain.documents import DocumentStore
from shared.domain.stream_state import StreamState, StreamStateStore, initial_state
from shared.errors import Aborted
from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.runtime.context import build_openviking_client
from tests.capture.conftest import CaptureStack, new_identity, parsed, stream_state
from tests.capture.messages import conversation
from tests.capture.test_capture_service import after_turn
from tests.capture.test_exactly_once import assert_once_in_order
from tests.support.call_log import CallLog
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack


async def test_a_creation_left_unfinished_is_taken_over_and_its_late_write_refused(
    capture_stack: CaptureStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    who = parsed(identity)
    documents, layout = DocumentStore(host.openviking), stream_state_layout(who.stream_id)
    assert await documents.ensure_directory(who.tenant, stream_dir(who.stream_id))  # the dead creator's claim

    with pytest.raises(aio.AioRpcError) as waited:  # the claim is fresh: its creator may be alive
        await host.stub.AfterTurn(after_turn(identity, conversation(2), 0), timeout=1.5)
    assert waited.value.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert await documents.entry(who.tenant, layout.slot_uri(0)) is None  # not fenced

    monkeypatch.setattr(document_slots, "TAKEOVER_AFTER_SECONDS", 0.0)
    transcript = conversation(3)
    answer = await host.stub.AfterTurn(after_turn(identity, transcript, 0), timeout=30)
    assert answer.persisted_count == len(transcript)
    fence = await documents.entry(who.tenant, layout.slot_uri(0))
    assert fence is not None and fence.is_dir
    await assert_once_in_order(host.openviking, identity, len(transcript))

    before = await stream_state(host.openviking, identity)
    late = initial_state(who).model_dump(mode="json")
    with pytest.raises(Aborted, match="taken over"):  # the dead creator's write, landing now
        await DocumentSlots(documents).create(
            who.tenant, stream_state_layout(who.stream_id), 0, late, deadline=None
        )
    after = await stream_state(host.openviking, identity)
    assert after.last_sequence == before.last_sequence == len(transcript) - 1

    more = conversation(5)  # the stream goes on in its new slot
    again = await host.stub.AfterTurn(after_turn(identity, more, len(transcript)), timeout=30)
    assert again.persisted_count == len(more) - len(transcript)
    await assert_once_in_order(host.openviking, identity, len(more))


async def test_a_creation_that_landed_is_never_fenced(
    capture_stack: CaptureStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even when takeover is allowed at once, a slot holding a state is used, not replaced."""
    monkeypatch.setattr(document_slots, "TAKEOVER_AFTER_SECONDS", 0.0)
    host = await capture_stack.start()
    identity = new_identity()
    transcript = conversation(2)
    await host.stub.AfterTurn(after_turn(identity, transcript, 0), timeout=30)
    who = parsed(identity)
    slots, layout = DocumentSlots(DocumentStore(host.openviking)), stream_state_layout(who.stream_id)
    read = await slots.read(who.tenant, layout, deadline=None)
    assert read.slot == 0 and read.stored is not None
    assert await slots.claim(who.tenant, layout, 0, deadline=None) is None
    assert (await slots.read(who.tenant, layout, deadline=None)).stored == read.stored


class SlowCreation:
    """HTTP middleware: a state creation (the one unconditional write of a slot) reaches
    OpenViking up to 0.3 s late, so that other callers take it over meanwhile."""

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        batch = request.json_body() if request.path.endswith("/batch-write") else {}
        operations = batch.get("operations", [])
        if any("/state" in op["uri"] and not op.get("expected_sha256") for op in operations):
            await asyncio.sleep(random.uniform(0.0, 0.3))
        return await send(request)


@pytest.mark.parametrize("callers", [8])
async def test_racing_creators_with_instant_takeover_lose_no_update(
    openviking: OpenVikingEndpoint, monkeypatch: pytest.MonkeyPatch, callers: int
) -> None:
    """The worst case for creation: each caller of a new stream is a replica of its own whose
    creations are slow, and may take over any other's at once. Each update a caller was told
    succeeded is in the final state, whichever slot it ended in."""
    monkeypatch.setattr(document_slots, "TAKEOVER_AFTER_SECONDS", 0.0)
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    who = parsed(new_identity())

    def bump(state: StreamState) -> StreamState:
        state.turns_since_compaction += 1
        return state

    async def one_update() -> bool:
        async with build_openviking_client(settings, middlewares=[SlowCreation()]) as ov:
            try:
                await StreamStateStore(DocumentStore(ov)).update(who, bump)
            except Aborted:
                return False
            return True

    succeeded = sum(await asyncio.gather(*(one_update() for _ in range(callers))))
    async with build_openviking_client(settings) as ov:
        read = await DocumentSlots(DocumentStore(ov)).read(
            who.tenant, stream_state_layout(who.stream_id), deadline=None
        )
    assert succeeded >= 1 and read.stored is not None
    assert read.stored.data["turns_since_compaction"] == succeeded


async def test_a_stale_remembered_version_is_read_again_at_once(
    openviking: OpenVikingEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica A remembers the state it wrote; replica B (or a compaction's hand-off) writes
    after it. A's next update conflicts on the remembered version and reads the state again
    without backing off (nothing contends), then lands on top of B's: no update is lost."""
    pauses: list[int] = []
    real_back_off = documents_module.back_off

    async def counted_back_off(attempt: int) -> None:
        pauses.append(attempt)
        await real_back_off(attempt)

    monkeypatch.setattr(documents_module, "back_off", counted_back_off)
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    who = parsed(new_identity())

    def bump(state: StreamState) -> StreamState:
        state.turns_since_compaction += 1
        return state

    log = CallLog()
    async with (
        build_openviking_client(settings, middlewares=[log]) as ov_a,
        build_openviking_client(settings) as ov_b,
    ):
        replica_a, replica_b = StreamStateStore(DocumentStore(ov_a)), StreamStateStore(DocumentStore(ov_b))
        await replica_a.update(who, bump)
        await replica_b.update(who, bump)
        first = log.mark()
        state, written = await replica_a.update(who, bump)
    assert written and state.turns_since_compaction == 3
    assert [str(call) for call in log.calls[first:]] == [
        "POST /api/v1/content/batch-write",
        "GET /api/v1/content/read",
        "POST /api/v1/content/batch-write",
    ]
    assert pauses == []
