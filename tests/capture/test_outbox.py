"""Outbox claims (`services.capture.outbox`): what a claim stores of its turn, and the sweep that
completes one left on a stream nobody calls again (`services.capture.outbox_sweep`)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from contextengine.v1 import common_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from services.capture.claim_repair import ClaimRepair
from services.capture.claims import STALE_CLAIM_SECONDS, Candidate, ClaimPlan
from services.capture.outbox import OUTBOX_MAX_BYTES, OUTBOX_MAX_MESSAGES, packer
from services.capture.outbox_sweep import OutboxSweep
from services.capture.transcript import TranscriptWriter
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.envelope import openviking_message, texts_of
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore, utc_now
from shared.runtime.context import build_openviking_client
from shared.tokens import TokenCounter
from tests.capture.conftest import new_identity, parsed
from tests.capture.messages import conversation, user
from tests.capture.test_exactly_once import assert_once_in_order
from tests.capture.test_partial_failures import whole
from tests.contract.host_messages import transcripts
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint

COUNTER = TokenCounter("cl100k_base")
IDENTITY = parsed(new_identity())
SESSION = "ce-x-g0000"


def plan_of(messages: list[common_pb2.ConversationMessage], start: int = 0) -> ClaimPlan:
    return ClaimPlan(
        start, start + len(messages) - 1, [Candidate(start + i, m) for i, m in enumerate(messages)]
    )


def empty_state() -> StreamState:
    return StreamState(
        host_session_id="s", agent_id="a", stream_id=IDENTITY.stream_id, active_session="ce-x-g0000"
    )


@settings(max_examples=60, deadline=None)
@given(transcripts(min_size=1, max_size=12), st.integers(min_value=0, max_value=10_000))
def test_an_outbox_survives_the_state_document_and_sends_what_the_append_would(
    messages: list[common_pb2.ConversationMessage], start: int
) -> None:
    """Whatever the host messages: the outbox read back from the state's JSON holds, per position,
    the very body the owner's append sends, and the counts its release adds."""
    plan = plan_of(messages, start)
    outbox = packer(IDENTITY, COUNTER)(empty_state(), plan)
    assert outbox is not None
    state = empty_state()
    state.pending_write = PendingWrite(
        start_sequence=plan.start,
        end_sequence=plan.end,
        session_id="ce-x-g0000",
        claimed_at=utc_now(),
        outbox=outbox,
    )
    stored = StreamState.model_validate_json(state.model_dump_json())
    assert stored == state
    back = stored.pending_write.outbox  # type: ignore[union-attr]
    assert back is not None
    assert [(m.sequence, m.body.to_body()) for m in back.messages] == [
        (start + i, openviking_message(IDENTITY.stream_id, start + i, m).to_body())
        for i, m in enumerate(messages)
    ]
    users = sum(m.role == common_pb2.MESSAGE_ROLE_USER for m in messages)
    assert (back.turns, back.tokens) == (users, sum(COUNTER.count_message(texts_of(m)) for m in messages))


def test_a_turn_past_one_append_or_the_size_bound_or_an_unsettled_range_has_no_outbox() -> None:
    pack = packer(IDENTITY, COUNTER)
    assert pack(empty_state(), plan_of([user("hi")] * OUTBOX_MAX_MESSAGES)) is not None
    assert pack(empty_state(), plan_of([user("hi")] * (OUTBOX_MAX_MESSAGES + 1))) is None
    assert pack(empty_state(), plan_of([user("x" * (OUTBOX_MAX_BYTES + 1))])) is None
    unsettled = empty_state()
    unsettled.unsettled = [
        PendingWrite(start_sequence=3, end_sequence=5, session_id=SESSION, claimed_at=utc_now())
    ]
    assert pack(unsettled, plan_of([user("a"), user("b")], start=5)) is None
    assert pack(unsettled, plan_of([user("a"), user("b")], start=6)) is not None


@pytest.mark.stack
async def test_the_sweep_completes_a_dead_owners_claim_on_a_stream_nobody_calls_again(
    openviking: OpenVikingEndpoint,
) -> None:
    """The owner of a claim with an outbox died before appending (its caller was answered); no
    call comes again. A replica that served the stream earlier looks at it once it is quiet and
    completes the claim: every message stored once, counted once."""
    settings_ = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings_) as ov:
        identity_msg = new_identity()
        identity: RequestIdentity = parsed(identity_msg)
        transcript = conversation(3)
        states = StreamStateStore(DocumentStore(ov))
        earlier = TranscriptWriter(ov, states)
        await earlier.write(identity, whole(transcript[:2]), COUNTER)
        await settled_stream_state(states, identity)
        outbox = packer(identity, COUNTER)(empty_state(), plan_of(transcript[2:], start=2))
        assert outbox is not None

        def dead_owners_claim(state: StreamState) -> StreamState:
            state.pending_write = PendingWrite(
                start_sequence=2,
                end_sequence=len(transcript) - 1,
                session_id=state.active_session,
                claimed_at=utc_now() - timedelta(seconds=STALE_CLAIM_SECONDS - 1),
                expected=len(transcript) - 2,
                outbox=outbox,
            )
            state.last_sequence = len(transcript) - 1
            return state

        await states.update(identity, dead_owners_claim)
        sweep = OutboxSweep(states, ClaimRepair(ov, states, utc_now).repair, utc_now, quiet=0.0)
        sweep.served(identity, COUNTER)
        await sweep.sweep_once()  # not stale yet: looked at again when it is
        assert sweep.watched == 1
        assert (await states.load(identity)).pending_write is not None  # type: ignore[union-attr]
        await asyncio.sleep(1.2)
        await sweep.sweep_once()
        assert sweep.watched == 0
        await assert_once_in_order(ov, identity_msg, len(transcript))
        final = await settled_stream_state(states, identity, within=1.0)
        assert final.last_sequence == len(transcript) - 1 and final.turns_since_compaction == 3
        await sweep.close()
        await earlier.drain()
