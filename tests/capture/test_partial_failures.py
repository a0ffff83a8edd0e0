"""A write that fails between claim and release leaves nothing skipped and nothing doubled: a
claim with an outbox is completed, any other rolled back to what landed.

The OpenViking client here is real; a subclass fails `add_messages` before or after the real
append (an ambiguous failure: the request landed but the answer was lost), or a middleware
answers state compare-and-swaps with OpenViking's conflict, as if other writers won them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from contextengine.v1 import common_pb2

from services.capture.outbox import OUTBOX_MAX_MESSAGES
from services.capture.transcript import Candidate, ClaimPlan, Planner, TranscriptWriter
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.identity import parse_identity
from shared.domain.stream_state import MAX_CAS_ATTEMPTS, StreamState, StreamStateStore
from shared.errors import BackendUnavailable
from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.openviking.models.parts import NewMessage
from shared.openviking.models.sessions import MessagesAdded
from shared.openviking.tenant import Tenant
from shared.runtime.context import build_openviking_client
from shared.tokens import TokenCounter
from tests.capture.conftest import new_identity
from tests.capture.messages import conversation
from tests.capture.test_capture_service import stored_turns
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack


class FlakyAppend:
    """Wraps the real client; the next `add_messages` fails before or after really appending."""

    def __init__(self, real: object, *, after: bool) -> None:
        self._real = real
        self.after = after
        self.armed = True

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    async def add_messages(
        self,
        tenant: Tenant,
        session_id: str,
        messages: Sequence[NewMessage],
        *,
        deadline: float | None = None,
        call_timeout: float | None = None,
    ) -> MessagesAdded:
        if self.armed and not self.after:
            self.armed = False
            raise BackendUnavailable("injected failure before the append")
        result: MessagesAdded = await self._real.add_messages(  # type: ignore[attr-defined]
            tenant, session_id, messages, deadline=deadline, call_timeout=call_timeout
        )
        if self.armed:
            self.armed = False
            raise BackendUnavailable("injected failure after the append (answer lost)")
        return result


def whole(transcript: Sequence[common_pb2.ConversationMessage]) -> Planner:
    """AfterTurn's plan: every position after the last one persisted."""

    def plan(state: StreamState) -> ClaimPlan | None:
        start = state.last_sequence + 1
        if start >= len(transcript):
            return None
        candidates = [Candidate(i, transcript[i]) for i in range(start, len(transcript))]
        return ClaimPlan(start, len(transcript) - 1, candidates)

    return plan


@pytest.mark.parametrize("after", [False, True], ids=["fails-before-append", "fails-after-append"])
@pytest.mark.parametrize("completed_by", ["next-delivery", "owner"])
async def test_a_failed_append_of_an_answered_claim_is_completed_from_its_outbox(
    openviking: OpenVikingEndpoint, after: bool, completed_by: str
) -> None:
    """A turn one append stores is answered once claimed; when its append then fails, the claim
    is completed (never rolled back) by the stream's next delivery or, if none comes, by its
    owner a moment later: every message stored once, counted once."""
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        identity_msg = new_identity()
        identity = parse_identity(identity_msg, default_agent_id="a", session_required=True)
        transcript = conversation(3)
        states = StreamStateStore(DocumentStore(ov))
        flaky = TranscriptWriter(FlakyAppend(ov, after=after), states)  # type: ignore[arg-type]
        counter = TokenCounter("cl100k_base")

        answered = await flaky.write(identity, whole(transcript), counter)
        assert len(answered.persisted) == len(transcript)
        assert answered.state.last_sequence == len(transcript) - 1 and answered.state.pending_write is None
        if completed_by == "next-delivery":
            claimed = await states.load(identity)
            assert claimed is not None and claimed.pending_write is not None
            assert claimed.pending_write.outbox is not None
            again = await TranscriptWriter(ov, states).write(identity, whole(transcript), counter)
            assert again.persisted == []  # nothing left to claim: the repair completed the turn
        await flaky.drain()
        stored = await stored_turns(ov, identity_msg)
        assert [s for s, _ in stored] == list(range(len(transcript)))
        final = await settled_stream_state(states, identity)
        assert final.last_sequence == len(transcript) - 1
        assert (final.turns_since_compaction, final.tokens_since_compaction) == (
            3,
            answered.state.active_tokens,
        )


@pytest.mark.parametrize("after", [False, True], ids=["fails-before-append", "fails-after-append"])
async def test_a_failed_append_over_one_append_is_rolled_back_and_repaired_on_the_next_delivery(
    openviking: OpenVikingEndpoint, after: bool
) -> None:
    """A turn longer than one append has no outbox: its caller waits for the append and sees it
    fail; the claim is rolled back to what landed and the next delivery stores the rest, once."""
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        identity_msg = new_identity()
        identity = parse_identity(identity_msg, default_agent_id="a", session_required=True)
        transcript = conversation(OUTBOX_MAX_MESSAGES // 2 + 1)
        assert len(transcript) > OUTBOX_MAX_MESSAGES
        states = StreamStateStore(DocumentStore(ov))
        flaky = TranscriptWriter(FlakyAppend(ov, after=after), states)  # type: ignore[arg-type]
        healthy = TranscriptWriter(ov, states)
        counter = TokenCounter("cl100k_base")

        with pytest.raises(BackendUnavailable):
            await flaky.write(identity, whole(transcript), counter)
        state = await states.load(identity)
        assert state is not None and state.pending_write is not None  # claimed, marked for repair
        assert state.pending_write.outbox is None
        result = await healthy.write(identity, whole(transcript), counter)
        stored = await stored_turns(ov, identity_msg)
        assert [s for s, _ in stored] == list(range(len(transcript)))
        assert len(result.persisted) == (0 if after else len(transcript))
        final = await settled_stream_state(states, identity)
        assert final.last_sequence == len(transcript) - 1
        assert final.turns_since_compaction == OUTBOX_MAX_MESSAGES // 2 + 1


class LostCasRounds:
    """HTTP middleware: the next `rounds` compare-and-swaps of a stream state are answered with
    OpenViking's 409 conflict without reaching it, as if another writer had won each of them."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        batch = request.json_body() if request.path.endswith("/batch-write") else {}
        operations = batch.get("operations", [])
        if self.rounds > 0 and any(
            op.get("expected_sha256") and op["uri"].endswith("/state.json") for op in operations
        ):
            self.rounds -= 1
            body = {"status": "error", "error": {"code": "CONFLICT", "message": "content changed"}}
            return HttpResponse(409, "Conflict", json.dumps(body).encode())
        return await send(request)


async def test_a_claim_that_keeps_losing_its_compare_and_swap_waits_instead_of_failing(
    openviking: OpenVikingEndpoint,
) -> None:
    """More lost rounds than one state update tries (`MAX_CAS_ATTEMPTS`): the claim is tried again
    within the call's time, like a claim held by another writer, and the turn is stored once."""
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    lost = LostCasRounds(0)
    async with build_openviking_client(settings, middlewares=[lost]) as ov:
        identity_msg = new_identity()
        identity = parse_identity(identity_msg, default_agent_id="a", session_required=True)
        transcript = conversation(2)
        states = StreamStateStore(DocumentStore(ov))
        await states.update(identity, lambda current: current)  # the state exists: updates are CAS
        writer = TranscriptWriter(ov, states)

        lost.rounds = MAX_CAS_ATTEMPTS + 3
        result = await writer.write(identity, whole(transcript), TokenCounter("cl100k_base"))
        assert lost.rounds == 0
        assert len(result.persisted) == len(transcript)
        stored = await stored_turns(ov, identity_msg)
        assert [s for s, _ in stored] == list(range(len(transcript)))
