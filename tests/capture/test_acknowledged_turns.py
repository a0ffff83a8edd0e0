"""A turn answered as stored is in OpenViking's session or archive once a flush answers OK or its
compaction completes, whichever replica claimed it (issue 33).

The replay that found it: the last turn of a session was claimed (its outbox written) by a
replica killed a moment later; the host's retry on another replica was answered DUPLICATE;
FlushSessions answered OK and the compaction COMPLETED without that turn. Here the "killed"
replica is a real capture host whose OpenViking client stops reaching OpenViking right after
the compare-and-swap that stores its claim (a `Middleware`): no append, no release, no repair
mark, no heartbeat - what kill -9 leaves. Real OpenViking, real gRPC, no clock tricks: the
flush waits until the dead claim is stale, completes it, then hands the stream off.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import grpc
import pytest
from contextengine.v1 import capture_pb2, checkpoint_pb2, common_pb2, compaction_pb2
from grpc import aio

from services.capture.claims import STALE_CLAIM_SECONDS
from shared.domain.documents import DocumentStore
from shared.domain.envelope import openviking_message
from shared.domain.stream_state import (
    Outbox,
    OutboxMessage,
    PendingWrite,
    StreamState,
    StreamStateStore,
    utc_now,
)
from shared.openviking.http import HttpRequest, HttpResponse, HttpUnreachable, Send
from tests.capture.conftest import CaptureStack, new_identity, parsed, settled_checkpoint, stream_state
from tests.capture.messages import conversation
from tests.capture.test_commit_turn import COMMITTED, DUPLICATE, commit
from tests.support.stored import stored_turns

pytestmark = pytest.mark.stack

TURN_MESSAGES = 4
"""Messages of one `commit` turn."""


class DiesAfterItsClaim:
    """A replica's OpenViking link that is cut right after it stores a claim with an outbox."""

    def __init__(self) -> None:
        self.armed = False
        self.dead_since: float | None = None

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        if self.dead_since is not None:
            raise HttpUnreachable("the replica was killed")
        response = await send(request)
        if self.armed and request.body is not None and _stores_an_outbox(request.body):
            self.dead_since = time.monotonic()
        return response


def _stores_an_outbox(body: bytes) -> bool:
    return b'outbox\\":{' in body or b'"outbox":{' in body


async def _sequences(host_ov: object, identity: common_pb2.Identity, *, archived: bool) -> Counter[int]:
    state = await stream_state(host_ov, identity, settled=False)  # type: ignore[arg-type]
    stored = await stored_turns(host_ov, parsed(identity).tenant, state.sessions)  # type: ignore[arg-type]
    return Counter(t.sequence for t in stored if t.archived or not archived)


async def test_a_flush_completes_the_turn_a_killed_replica_claimed_and_the_compaction_archives_it(
    capture_stack: CaptureStack,
) -> None:
    link = DiesAfterItsClaim()
    doomed = await capture_stack.start(middleware=link, compaction=False)
    survivor = await capture_stack.start()
    identity = new_identity()
    assert (await doomed.stub.CommitTurn(commit(identity, 1), timeout=30)).status == COMMITTED
    await stream_state(survivor.openviking, identity)  # its release is written
    link.armed = True
    last = await doomed.stub.CommitTurn(commit(identity, 2), timeout=30)
    assert (last.status, last.last_sequence) == (COMMITTED, 2 * TURN_MESSAGES - 1)  # acknowledged
    assert link.dead_since is not None
    retry = await survivor.stub.CommitTurn(commit(identity, 2), timeout=30)
    assert retry.status == DUPLICATE
    left = await stream_state(survivor.openviking, identity, settled=False)
    assert left.pending_write is not None and left.pending_write.outbox is not None  # not stored yet

    flushed = await survivor.stub.FlushSessions(
        capture_pb2.FlushSessionsRequest(identity=identity), timeout=STALE_CLAIM_SECONDS + 30
    )
    # OK only after the dead replica's claim went stale and was completed from its outbox
    assert time.monotonic() - link.dead_since >= STALE_CLAIM_SECONDS
    [handed_off] = flushed.checkpoints
    every = list(range(2 * TURN_MESSAGES))
    assert sorted((await _sequences(survivor.openviking, identity, archived=False)).elements()) == every
    state = await stream_state(survivor.openviking, identity, settled=False)
    assert state.pending_write is None and state.inflight[-1].session_id == handed_off.session_id
    done = await settled_checkpoint(survivor, identity, handed_off.checkpoint_id)
    assert done.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED
    assert sorted((await _sequences(survivor.openviking, identity, archived=True)).elements()) == every


async def test_a_flush_that_cannot_wait_for_a_live_claim_answers_aborted_and_keeps_the_turn(
    capture_stack: CaptureStack,
) -> None:
    """Within the flush's deadline the claim's owner may still be appending: never OK without it."""
    link = DiesAfterItsClaim()
    doomed = await capture_stack.start(middleware=link, compaction=False)
    survivor = await capture_stack.start(compaction=False)
    identity = new_identity()
    link.armed = True
    assert (await doomed.stub.CommitTurn(commit(identity, 1), timeout=30)).status == COMMITTED
    with pytest.raises(aio.AioRpcError) as refused:
        await survivor.stub.FlushSessions(capture_pb2.FlushSessionsRequest(identity=identity), timeout=4)
    assert refused.value.code() == grpc.StatusCode.ABORTED, refused.value.details()
    assert "retry" in (refused.value.details() or "")
    state = await stream_state(survivor.openviking, identity, settled=False)
    assert state.checkpoint_ids == [] and state.pending_write is not None
    assert state.pending_write.outbox is not None
    assert len(state.pending_write.outbox.messages) == TURN_MESSAGES


async def test_a_compaction_never_archives_a_session_while_an_answered_claim_on_it_is_incomplete(
    capture_stack: CaptureStack,
) -> None:
    """Compact hands the session off past a dead replica's claim (old enough to be nobody's
    write in progress): the commit waits until the claim is stale, completes it into the session
    it was claimed on, and archives the turns with the ones before them."""
    host = await capture_stack.start()
    identity = new_identity()
    who = parsed(identity)
    transcript = conversation(2)
    before, answered = transcript[:2], transcript[2:]
    states = StreamStateStore(DocumentStore(host.openviking))

    def claim_with_outbox(state: StreamState) -> StreamState:
        bodies = [openviking_message(who.stream_id, 2 + i, m) for i, m in enumerate(answered)]
        state.pending_write = PendingWrite(
            start_sequence=2,
            end_sequence=len(transcript) - 1,
            session_id=state.active_session,
            claimed_at=utc_now() - timedelta(seconds=STALE_CLAIM_SECONDS - 6),
            expected=len(answered),
            outbox=Outbox(
                messages=[OutboxMessage(sequence=2 + i, body=b) for i, b in enumerate(bodies)],
                turns=1,
                tokens=10,
            ),
        )
        state.last_sequence = len(transcript) - 1
        state.turns_since_compaction = 1
        return state

    state, _ = await states.update(who, claim_with_outbox)
    await host.openviking.add_messages(
        who.tenant,
        state.active_session,
        [openviking_message(who.stream_id, i, m) for i, m in enumerate(before)],
    )
    compacted = await host.compaction.Compact(
        compaction_pb2.CompactRequest(identity=identity, force=True), timeout=60
    )
    checkpoint_id = compacted.checkpoint.checkpoint_id
    assert checkpoint_id, compacted.reason
    done = await settled_checkpoint(host, identity, checkpoint_id)
    assert done.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED
    archived = await _sequences(host.openviking, identity, archived=True)
    assert sorted(archived.elements()) == list(range(len(transcript)))
    final = await stream_state(host.openviking, identity, settled=False)
    assert final.pending_write is None and final.last_sequence == len(transcript) - 1
