"""How many OpenViking round trips AfterTurn and CommitTurn wait for (issue 16).

On the steady path (the stream exists, no other writer, no trigger) a turn waits for one: the
claim's compare-and-swap, which stores the turn's messages with the claim (its outbox,
`services.capture.outbox`). The append, the release and the turn index follow off the caller's
path. Shown through `CallLog` on the real OpenViking: every request after the call's first is
held until the call has returned - a call that needed a second would never return.
The trigger and contention paths wait for more and must stay exactly-once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import pytest
from contextengine.v1 import capture_pb2, checkpoint_pb2, common_pb2

from services.capture.releases import OwedReleases
from services.capture.transcript import TranscriptWriter
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.stream_state import StreamStateStore
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import build_openviking_client
from tests.capture.conftest import CaptureHost, CaptureStack, new_identity, parsed, stream_state
from tests.capture.messages import assistant, user
from tests.capture.test_capture_service import after_turn
from tests.capture.test_commit_turn import commit
from tests.capture.test_exactly_once import COUNTER, assert_once_in_order, whole_transcript
from tests.support.call_log import Call, CallLog
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

STEADY_ROUND_TRIPS = 1
STATE_WRITE = "POST /api/v1/content/batch-write"
APPEND = "POST /api/v1/sessions/{id}/messages/batch"
READ = "GET /api/v1/content/read"
CALL_TIMEOUT = 30.0
T = TypeVar("T")


def exchanges(count: int) -> list[common_pb2.ConversationMessage]:
    """`count` user/assistant exchanges (two messages each)."""
    return [m for i in range(count) for m in (user(f"question {i} on service {i}"), assistant(f"answer {i}"))]


def capture_client(openviking: OpenVikingEndpoint, log: CallLog) -> OpenVikingClient:
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    return build_openviking_client(settings, middlewares=[log])


async def settle(host: CaptureHost, log: CallLog, identity: object) -> None:
    """Wait until the last turn's release and index writes are done (the next turn is steady)."""
    await stream_state(host.openviking, identity)  # type: ignore[arg-type]
    await log.idle()


async def waited(log: CallLog, call: Awaitable[T]) -> tuple[T, list[Call]]:
    """Run `call` letting only its first `STEADY_ROUND_TRIPS` requests through: its answer and
    the requests that went through before it answered (any later one was held: not waited for)."""
    start = log.mark()
    log.hold_after(STEADY_ROUND_TRIPS)
    try:
        answer = await call
        sent = [c for c in log.calls[start:] if not c.held]
    finally:
        log.let_go()
    return answer, sent


async def test_steady_after_turn_waits_for_the_claim_only(capture_stack: CaptureStack) -> None:
    log = CallLog()
    host = await capture_stack.start(compaction=False, middleware=log)
    identity = new_identity()
    transcript = exchanges(4)
    await host.stub.AfterTurn(after_turn(identity, transcript[:2], 0), timeout=CALL_TIMEOUT)
    for n in range(2, 5):
        await settle(host, log, identity)
        delivery = after_turn(identity, transcript[: 2 * n], 2 * n - 2)
        reply, sent = await waited(log, host.stub.AfterTurn(delivery, timeout=CALL_TIMEOUT))
        assert [str(c) for c in sent] == [STATE_WRITE], sent
        assert (reply.persisted_count, reply.last_sequence) == (2, 2 * n - 1)
        assert reply.estimated_tokens > 0
    await assert_once_in_order(host.openviking, identity, len(transcript))
    state = await stream_state(host.openviking, identity)
    assert (state.last_sequence, state.turns_since_compaction) == (len(transcript) - 1, 4)


async def test_steady_commit_turn_waits_for_the_claim_only_and_a_replay_is_duplicate(
    capture_stack: CaptureStack,
) -> None:
    log = CallLog()
    host = await capture_stack.start(compaction=False, middleware=log)
    identity = new_identity()
    await host.stub.CommitTurn(commit(identity, 1), timeout=CALL_TIMEOUT)
    for n in (2, 3):
        await settle(host, log, identity)
        reply, sent = await waited(log, host.stub.CommitTurn(commit(identity, n), timeout=CALL_TIMEOUT))
        assert len(sent) <= STEADY_ROUND_TRIPS, sent
        assert reply.status == capture_pb2.COMMIT_TURN_STATUS_COMMITTED
        assert (reply.first_sequence, reply.last_sequence) == (4 * n - 4, 4 * n - 1)
    await settle(host, log, identity)  # the answered turn's append starts after its answer
    replay, sent = await waited(log, host.stub.CommitTurn(commit(identity, 3), timeout=CALL_TIMEOUT))
    assert replay.status == capture_pb2.COMMIT_TURN_STATUS_DUPLICATE and len(sent) <= STEADY_ROUND_TRIPS
    assert (replay.first_sequence, replay.last_sequence) == (8, 11)
    await assert_once_in_order(host.openviking, identity, 12)
    state = await stream_state(host.openviking, identity)
    assert [(t.first_sequence, t.last_sequence) for t in state.committed_turns] == [(0, 3), (4, 7), (8, 11)]


async def test_a_release_owed_is_folded_into_the_next_claim(openviking: OpenVikingEndpoint) -> None:
    """A replica's next claim of the stream releases its landed claim in the same write."""
    log = CallLog()
    async with capture_client(openviking, log) as ov:
        states = StreamStateStore(DocumentStore(ov))
        writer = TranscriptWriter(ov, states, releases=OwedReleases(states, grace=3600.0))
        identity = parsed(new_identity())
        transcript = exchanges(2)
        await writer.write(identity, whole_transcript(transcript[:2]), COUNTER)  # type: ignore[arg-type]
        await writer.appended(identity)  # its append (after the answer) landed: the release is owed
        start = log.mark()
        result = await writer.write(identity, whole_transcript(transcript), COUNTER)  # type: ignore[arg-type]
        assert len(log.calls[start:]) == STEADY_ROUND_TRIPS, log.calls[start:]
        assert [c.sequence for c in result.persisted] == [2, 3]
        await writer.drain()
        state = await settled_stream_state(states, identity)
        assert (state.last_sequence, state.turns_since_compaction) == (3, 2)


async def test_a_turn_right_behind_its_streams_running_append_claims_in_one_write(
    openviking: OpenVikingEndpoint,
) -> None:
    """Back to back on one replica, the next turn waits for the previous turn's append (still
    running: held here) and then releases it and claims in one write, without reading the
    state it would find claimed."""
    log = CallLog()
    async with capture_client(openviking, log) as ov:
        states = StreamStateStore(DocumentStore(ov))
        writer = TranscriptWriter(ov, states, releases=OwedReleases(states, grace=3600.0))
        host_identity = new_identity()
        identity = parsed(host_identity)
        transcript = exchanges(2)
        await writer.write(identity, whole_transcript(transcript[:2]), COUNTER)  # type: ignore[arg-type]
        start = log.mark()
        log.hold_after(0)  # the first turn's append (started after its answer) is held
        try:
            second = asyncio.create_task(
                writer.write(identity, whole_transcript(transcript), COUNTER)  # type: ignore[arg-type]
            )
            await asyncio.sleep(0.3)
            assert not second.done()
        finally:
            log.let_go()
        result = await asyncio.wait_for(second, CALL_TIMEOUT)
        sent = [str(c) for c in log.calls[start:]]
        assert sent[:2] == [APPEND, STATE_WRITE], sent  # then the second turn's own append
        assert READ not in sent, sent
        assert [c.sequence for c in result.persisted] == [2, 3]
        await writer.drain()
        await assert_once_in_order(ov, host_identity, len(transcript))
        state = await settled_stream_state(states, identity)
        assert (state.last_sequence, state.turns_since_compaction) == (3, 2)


async def test_a_firing_trigger_is_handed_off_before_the_turn_returns(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compaction=False, compactTurnThreshold=2)
    identity = new_identity()
    transcript = exchanges(2)
    quiet = await host.stub.AfterTurn(after_turn(identity, transcript[:2], 0), timeout=CALL_TIMEOUT)
    fired = await host.stub.AfterTurn(after_turn(identity, transcript, 2), timeout=CALL_TIMEOUT)
    assert quiet.trigger_fired == checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED
    assert fired.trigger_fired == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
    now = await stream_state(host.openviking, identity, settled=False)
    assert now.pending_write is None and now.checkpoint_ids == [fired.compaction_checkpoint_id]
    assert [c.checkpoint_id for c in now.inflight] == [fired.compaction_checkpoint_id]
    assert (now.generation, now.turns_since_compaction) == (1, 0)


async def test_replicas_racing_on_a_turn_store_it_once(capture_stack: CaptureStack) -> None:
    one, two = await capture_stack.start(compaction=False), await capture_stack.start(compaction=False)
    identity = new_identity()
    transcript = exchanges(3)
    for n in range(1, 4):
        delivery = after_turn(identity, transcript[: 2 * n], 2 * n - 2)
        replies = await asyncio.gather(
            *(host.stub.AfterTurn(delivery, timeout=CALL_TIMEOUT) for host in (one, two, one, two))
        )
        assert sum(r.persisted_count for r in replies) == 2
        assert sum(r.duplicate_count for r in replies) == 6
    await assert_once_in_order(one.openviking, identity, len(transcript))
    state = await stream_state(two.openviking, identity)
    assert (state.last_sequence, state.turns_since_compaction) == (5, 3)
