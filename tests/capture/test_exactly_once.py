"""Exactly-once turn storage under every interleaving of append / timeout / crash / commit / repair.

Real OpenViking, real gRPC; the slow network is a real TCP proxy (`tests.support.delay_proxy`)
that lands an append after the caller gave up. Each test is one interleaving, written down:

1. append held past the caller's deadline: a turn with an outbox is answered once claimed and
   its append lands later; a longer turn's caller is cancelled -> append lands -> retry: either
   way the owner finishes the append and releases; the retry writes nothing;
2. append lands -> owner dies -> Compact archives the session -> next delivery repairs:
   the repair finds the turns in the archive, nothing is appended again;
3. append never sent -> owner dies -> Compact archives the session -> next delivery repairs:
   rolled back and appended once, to the new session;
4. append unanswered (the owner's own timeout) -> the append lands late: a claim without an
   outbox is rolled back first and the next delivery recognises the late turns by turn id; a
   claim with one is completed after `LATE_LANDING_GRACE_SECONDS`, by its owner or the next
   delivery, and its read finds them: not appended again;
5. two replicas deliver the same and overlapping transcripts concurrently: every position once.

Every test asserts from OpenViking's storage (archives and live messages of every session of
the stream, duplicates kept) that each position is stored exactly once and in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest
from contextengine.v1 import common_pb2, compaction_pb2
from grpc import aio

from services.capture.claim_repair import ClaimRepair
from services.capture.claims import STALE_CLAIM_SECONDS
from services.capture.landed_claims import SETTLE_AFTER_SECONDS
from services.capture.outbox import OUTBOX_MAX_MESSAGES
from services.capture.transcript import Candidate, ClaimPlan, TranscriptWriter
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.envelope import openviking_message
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore, utc_now
from shared.errors import BackendTimeout
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import build_openviking_client
from shared.tokens import TokenCounter
from tests.capture.conftest import CaptureStack, new_identity, parsed, stream_state
from tests.capture.messages import conversation
from tests.capture.test_capture_service import after_turn
from tests.support.delay_proxy import DelayProxy
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint
from tests.support.stored import stored_turn_ids

pytestmark = pytest.mark.stack

APPEND_PATH = "/messages/batch"
LONG_TURN = OUTBOX_MAX_MESSAGES // 2 + 1
"""Exchanges of a turn longer than one append (no outbox)."""
COUNTER = TokenCounter("cl100k_base")


def proxy_for(openviking: OpenVikingEndpoint) -> DelayProxy:
    host, port = openviking.base_url.removeprefix("http://").rsplit(":", 1)
    return DelayProxy(host, int(port))


@contextlib.asynccontextmanager
async def direct_and_delayed(
    openviking: OpenVikingEndpoint,
) -> AsyncIterator[tuple[DelayProxy, OpenVikingClient, OpenVikingClient]]:
    """A delaying TCP proxy before OpenViking, a client straight to it and one through the proxy."""
    async with proxy_for(openviking) as proxy:
        direct = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
        delayed = load_settings(environ={}, overrides={"baseUrl": proxy.base_url})
        async with build_openviking_client(direct) as ov, build_openviking_client(delayed) as slow_ov:
            yield proxy, ov, slow_ov


async def assert_once_in_order(ov: OpenVikingClient, identity: common_pb2.Identity, count: int) -> None:
    state = await stream_state(ov, identity)
    stored = await stored_turn_ids(ov, parsed(identity).tenant, state.sessions)
    assert [sequence for sequence, _ in stored] == list(range(count)), stored


def whole_transcript(transcript: list[common_pb2.ConversationMessage]) -> ClaimPlan | None:
    """What AfterTurn plans: every position after the last one persisted."""

    def plan(state: StreamState) -> ClaimPlan | None:
        start = state.last_sequence + 1
        if start >= len(transcript):
            return None
        return ClaimPlan(
            start, len(transcript) - 1, [Candidate(i, transcript[i]) for i in range(start, len(transcript))]
        )

    return plan  # type: ignore[return-value]


async def leave_dead_claim(
    ov: OpenVikingClient,
    identity: RequestIdentity,
    transcript: list[common_pb2.ConversationMessage],
    *,
    appended: bool,
    age: timedelta = timedelta(seconds=25),
    expected: int = -1,
) -> None:
    """What a replica killed mid-write leaves: its claim (`age` old, never released), and its
    append landed or not."""
    states = StreamStateStore(DocumentStore(ov))

    def claim(state: StreamState) -> StreamState:
        state.pending_write = PendingWrite(
            start_sequence=0,
            end_sequence=len(transcript) - 1,
            session_id=state.active_session,
            claimed_at=utc_now() - age,
            expected=expected,
        )
        state.last_sequence = len(transcript) - 1
        return state

    state, _ = await states.update(identity, claim)
    if appended:
        await ov.add_messages(
            identity.tenant,
            state.active_session,
            [openviking_message(identity.stream_id, i, m) for i, m in enumerate(transcript)],
        )


@pytest.mark.parametrize("turns", [3, LONG_TURN], ids=["with-outbox", "over-one-append"])
async def test_1_append_outliving_the_callers_deadline_is_finished_not_repeated(
    capture_stack: CaptureStack, openviking: OpenVikingEndpoint, turns: int
) -> None:
    """Finding 3: an append reaching OpenViking after the call gave up was appended again."""
    async with proxy_for(openviking) as proxy:
        host = await capture_stack.start(base_url=proxy.base_url, timeoutMs=2000)
        identity = new_identity()
        transcript = conversation(turns)
        await host.stub.AfterTurn(after_turn(identity, transcript[:2], 0), timeout=30)
        await stream_state(host.openviking, identity)
        held = proxy.hold(APPEND_PATH, delay=4.0)
        if turns == LONG_TURN:
            with pytest.raises(aio.AioRpcError) as error:
                await host.stub.AfterTurn(after_turn(identity, transcript, 2), timeout=1.0)
            assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        else:  # answered once claimed: the append is not the caller's to wait for
            first = await host.stub.AfterTurn(after_turn(identity, transcript, 2), timeout=1.0)
            assert first.persisted_count == len(transcript) - 2
        retry = await host.stub.AfterTurn(after_turn(identity, transcript, 2), timeout=30)
        await asyncio.wait_for(held.delivered.wait(), 10)
        await assert_once_in_order(host.openviking, identity, len(transcript))
        assert retry.persisted_count == 0 and retry.duplicate_count == len(transcript) - 2
        state = await stream_state(host.openviking, identity)
        assert state.pending_write is None and state.last_sequence == len(transcript) - 1
        if turns < LONG_TURN:  # (the long turn fires the turn-count trigger: counters reset)
            assert state.turns_since_compaction == turns


@pytest.mark.parametrize("appended", [True, False], ids=["append-landed", "append-lost"])
async def test_2_3_dead_claim_repaired_after_a_compaction_archived_its_session(
    capture_stack: CaptureStack, appended: bool
) -> None:
    """Finding 2: the repair read only live messages and appended archived turns again."""
    host = await capture_stack.start()
    identity = new_identity()
    transcript = conversation(3)
    await leave_dead_claim(host.openviking, parsed(identity), transcript, appended=appended)
    compacted = await host.compaction.Compact(
        compaction_pb2.CompactRequest(identity=identity, force=True), timeout=120
    )
    assert compacted.compacted == appended, compacted.reason
    state = await stream_state(host.openviking, identity, settled=False)
    assert state.pending_write is not None  # still the dead replica's claim
    response = await host.stub.AfterTurn(after_turn(identity, transcript, len(transcript) - 2), timeout=60)
    assert response.persisted_count == (0 if appended else len(transcript))
    await assert_once_in_order(host.openviking, identity, len(transcript))
    final = await stream_state(host.openviking, identity)
    assert final.pending_write is None and final.last_sequence == len(transcript) - 1


async def test_4_append_landing_after_the_repair_is_recognised_by_turn_id(
    openviking: OpenVikingEndpoint,
) -> None:
    """A claim without an outbox (a turn longer than one append) is rolled back at once."""
    async with direct_and_delayed(openviking) as (proxy, ov, slow_ov):
        identity_msg = new_identity()
        identity = parsed(identity_msg)
        transcript = conversation(LONG_TURN)
        states = StreamStateStore(DocumentStore(ov))
        impatient = TranscriptWriter(slow_ov, StreamStateStore(DocumentStore(slow_ov)), append_timeout=1.0)
        healthy = TranscriptWriter(ov, states)
        plan = whole_transcript(transcript)
        held = proxy.hold(APPEND_PATH, delay=3.0)
        with pytest.raises(BackendTimeout):
            await impatient.write(identity, plan, COUNTER)  # type: ignore[arg-type]
        abandoned = (await states.load(identity)).pending_write  # type: ignore[union-attr]
        assert abandoned is not None and abandoned.outbox is None
        await ClaimRepair(ov, states, utc_now).repair(identity, abandoned, COUNTER)
        rolled_back = await states.load(identity)
        assert rolled_back is not None and rolled_back.last_sequence == -1 and rolled_back.unsettled
        await asyncio.wait_for(held.delivered.wait(), 10)  # ... and now the append lands
        result = await healthy.write(identity, plan, COUNTER)  # type: ignore[arg-type]
        # the first 100 landed late (one request); only the rest is appended
        assert [c.sequence for c in result.persisted] == list(range(len(transcript)))
        await assert_once_in_order(ov, identity_msg, len(transcript))
        final = await settled_stream_state(states, identity)
        assert final.unsettled == [] and final.turns_since_compaction == LONG_TURN


@pytest.mark.parametrize("completed_by", ["owner", "next-delivery"])
async def test_4_append_landing_late_is_found_by_the_completion_of_its_outbox(
    openviking: OpenVikingEndpoint, completed_by: str
) -> None:
    """The owner's append times out and lands 2 s later; the claim is completed no sooner than
    `LATE_LANDING_GRACE_SECONDS` after it was given up, by its owner or by the next delivery
    waiting for it: the completion's read finds the late turns and appends nothing."""
    async with direct_and_delayed(openviking) as (proxy, ov, slow_ov):
        identity_msg = new_identity()
        identity = parsed(identity_msg)
        transcript = conversation(3)
        states = StreamStateStore(DocumentStore(ov))
        impatient = TranscriptWriter(slow_ov, StreamStateStore(DocumentStore(slow_ov)), append_timeout=1.0)
        plan = whole_transcript(transcript)
        held = proxy.hold(APPEND_PATH, delay=3.0)
        answered = await impatient.write(identity, plan, COUNTER)  # type: ignore[arg-type]
        assert len(answered.persisted) == len(transcript)
        if completed_by == "next-delivery":
            await asyncio.sleep(1.5)  # the owner gave up on its append: the claim is marked
            again = await TranscriptWriter(ov, states).write(identity, plan, COUNTER)  # type: ignore[arg-type]
            assert again.persisted == []
        await impatient.drain()
        assert held.delivered.is_set()
        await assert_once_in_order(ov, identity_msg, len(transcript))
        final = await settled_stream_state(states, identity)
        assert final.last_sequence == len(transcript) - 1 and final.turns_since_compaction == 3


async def test_5_concurrent_and_duplicated_deliveries_over_two_replicas(capture_stack: CaptureStack) -> None:
    one, two = await capture_stack.start(), await capture_stack.start()
    identity = new_identity()
    transcript = conversation(8)
    deliveries = [
        stub.AfterTurn(after_turn(identity, transcript[: 2 * n], 0), timeout=60)
        for n in range(1, 9)
        for stub in (one.stub, two.stub)
    ]
    await asyncio.gather(*deliveries)
    await one.stub.AfterTurn(after_turn(identity, transcript, 0), timeout=60)
    await assert_once_in_order(one.openviking, identity, len(transcript))


async def test_6_a_replica_dead_before_its_release_is_settled_by_the_next_caller(
    capture_stack: CaptureStack,
) -> None:
    """Its append landed, its release (owed, written just after the answer) never came: the next
    delivery reads the claim back, finds all of it stored and releases it - well before the claim
    would be stale (the call's deadline is shorter than that)."""
    host = await capture_stack.start(compaction=False)
    identity = new_identity()
    transcript = conversation(3)
    age = timedelta(seconds=SETTLE_AFTER_SECONDS + 1)
    assert age.total_seconds() + 10 < STALE_CLAIM_SECONDS
    await leave_dead_claim(
        host.openviking, parsed(identity), transcript, appended=True, age=age, expected=len(transcript)
    )
    response = await host.stub.AfterTurn(after_turn(identity, transcript, len(transcript) - 2), timeout=10)
    assert (response.persisted_count, response.last_sequence) == (0, len(transcript) - 1)
    await assert_once_in_order(host.openviking, identity, len(transcript))
    state = await stream_state(host.openviking, identity)
    assert (state.last_sequence, state.turns_since_compaction) == (len(transcript) - 1, 3)
