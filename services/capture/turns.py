"""AfterTurn, CommitTurn and Ingest as plain async logic: persist, count, evaluate triggers,
start compactions."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from contextengine.v1 import checkpoint_pb2, common_pb2

from services.capture.backlog import IndexBacklog
from services.capture.claims import Candidate, ClaimPlan, Planner
from services.capture.compaction_client import CompactionNudger
from services.capture.decision import capture_decision
from services.capture.flush import StreamFlush
from services.capture.index_ledger import IndexLedger
from services.capture.injections import CleanedMessage, CleanedTranscript, clean_transcript
from services.capture.transcript import TranscriptWriter, WriteResult
from services.capture.triggers import TriggerThresholds, fired_trigger
from shared.domain.checkpoints import new_checkpoint_id
from shared.domain.envelope import turn_provenance
from shared.domain.handoff import compaction_inflight_for_active, hand_off
from shared.domain.identity import RequestIdentity
from shared.domain.messages import MessageShape
from shared.domain.stream_state import CommittedTurn, StreamState, StreamStateStore, turn_key_digest, utc_now
from shared.domain.turn_index import IndexedMessage
from shared.telemetry.tracing import current_traceparent
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

Role = common_pb2.MessageRole
Trigger = checkpoint_pb2.CompactionTrigger


@dataclass
class TurnOutcome:
    persisted_count: int = 0
    duplicate_count: int = 0
    injected_skipped_count: int = 0
    last_sequence: int = -1
    session_id: str = ""
    trigger: Trigger.ValueType = checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED
    checkpoint_id: str = ""
    estimated_tokens: int = 0
    capture_worthy: bool = False
    first_sequence: int = -1
    duplicate_turn: bool = False
    """CommitTurn: the advancement key was committed before; nothing was written."""


@dataclass(frozen=True)
class FencedTurn:
    """One turn of a host with turn fencing: only its messages, its key and its anchors."""

    messages: Sequence[common_pb2.ConversationMessage]
    advancement_key: str
    admission_json: str = ""
    terminal_json: str = ""


@dataclass
class KnownStreams:
    """Streams this replica wrote to (for the shutdown flush and FlushSessions)."""

    by_stream: dict[str, RequestIdentity] = field(default_factory=dict)

    def touch(self, identity: RequestIdentity) -> None:
        self.by_stream[identity.stream_id] = identity

    def for_user(self, identity: RequestIdentity, *, agent_id: str | None) -> list[RequestIdentity]:
        return [
            known
            for known in self.by_stream.values()
            if known.tenant == identity.tenant and (agent_id is None or known.agent_id == agent_id)
        ]


def _new_user_text(cleaned: Sequence[CleanedMessage]) -> str:
    texts = [
        block.text.text
        for c in cleaned
        if c.message is not None and c.message.role == Role.MESSAGE_ROLE_USER
        for block in c.message.content
        if block.HasField("text")
    ]
    return "\n".join(t for t in texts if t.strip())


class TurnCapture:
    def __init__(
        self,
        states: StreamStateStore,
        writer: TranscriptWriter,
        nudger: CompactionNudger,
        thresholds: TriggerThresholds,
        *,
        default_encoding: str,
        capture_max_length: int,
        index: IndexBacklog | None = None,
        ledger: IndexLedger | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._states = states
        self._writer = writer
        self._nudger = nudger
        self._thresholds = thresholds
        self._default_encoding = default_encoding
        self._capture_max_length = capture_max_length
        self._index = index
        self._ledger = ledger
        self._clock = clock
        self._flush = StreamFlush(
            states,
            writer.acknowledged,
            nudger,
            default_encoding=default_encoding,
            indexed=self._indexed,
            clock=clock,
        )
        self.known = KnownStreams()

    def _trigger_hand_off(
        self, identity: RequestIdentity, token_budget: int, fired: list[Trigger.ValueType]
    ) -> Callable[[StreamState], bool]:
        """The release hook: when a trigger fires, hand the compaction off in the same CAS."""
        checkpoint_id = new_checkpoint_id(identity.stream_id)
        traceparent = current_traceparent()

        def maybe_hand_off(state: StreamState) -> bool:
            fired.clear()
            now = self._clock()
            trigger = fired_trigger(state, self._thresholds, token_budget=token_budget, now=now)
            if trigger == checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED or compaction_inflight_for_active(
                state
            ):
                return False
            if isinstance(
                hand_off(state, checkpoint_id, now=now, trigger=trigger, traceparent=traceparent), StreamState
            ):
                fired.append(trigger)
            return bool(fired)

        return maybe_hand_off

    def _after_write(
        self,
        identity: RequestIdentity,
        state: StreamState,
        outcome: TurnOutcome,
        fired: Sequence[Trigger.ValueType],
    ) -> None:
        """Nudge compaction about a new hand-off now (the user's queued exchanges indexed first:
        compaction looks for them before it archives), about an older one still in flight now
        and then."""
        if fired:
            outcome.trigger = fired[0]
            outcome.checkpoint_id = state.checkpoint_ids[-1]
            self._nudger.nudge(identity, fired[0], after=self._indexed(identity))
        elif state.inflight:
            self._nudger.nudge(identity, checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED, again=True)

    async def _store(
        self,
        identity: RequestIdentity,
        plan: Planner,
        counter: TokenCounter,
        token_budget: int,
        deadline: float | None,
    ) -> tuple[WriteResult, StreamState, list[Trigger.ValueType]]:
        """Write what `plan` claims (a fired trigger handed off in the release), then index it
        in the background: the result, the state as released, and the trigger fired (if any)."""
        fired: list[Trigger.ValueType] = []
        result = await self._writer.write(
            identity,
            plan,
            counter,
            on_release=self._trigger_hand_off(identity, token_budget, fired),
            deadline=deadline,
        )
        if result.released is None:
            fired.clear()  # a repair released the claim: no hand-off was written by this call
        self._index_persisted(identity, result)
        return result, result.released or result.state, fired

    def _index_persisted(self, identity: RequestIdentity, result: WriteResult, *, bulk: bool = False) -> None:
        """Make what this call stored findable (the turn index), off the caller's path; never
        fails the turn (compaction indexes whatever is missing before it archives a session).
        `bulk` (Ingest): a batch already, written without waiting for more. Once written, the
        claim's range leaves the stream's ledger of unindexed ranges (`index_ledger`)."""
        if self._index is not None:
            stored = [
                IndexedMessage(c.sequence, c.message) for c in result.persisted if c.message is not None
            ]
            ledger = self._ledger
            written = (
                None
                if ledger is None
                else functools.partial(
                    ledger.indexed, identity, result.session_id, result.claimed_start, result.claimed_end
                )
            )
            self._index.add(identity.tenant, result.session_id, stored, on_written=written)
            if bulk:
                self._index.expedite(identity.tenant)

    def _indexed(self, identity: RequestIdentity) -> Callable[[], Awaitable[None]] | None:
        """The user's held exchanges sent to the turn index now, and how to wait until they are
        written: the compaction nudged after that finds them there instead of writing them again."""
        index = self._index
        if index is None:
            return None
        index.expedite(identity.tenant)
        return lambda: index.written(identity.tenant)

    def _admit(self, method: str) -> None:
        """Refuse a write while the background is at its hard bound (before anything is claimed)."""
        if self._index is not None:
            self._index.admit(method)

    async def after_turn(
        self,
        identity: RequestIdentity,
        messages: Sequence[common_pb2.ConversationMessage],
        pre_prompt_message_count: int,
        *,
        token_budget: int,
        model: str,
        shapes: Sequence[MessageShape],
        deadline: float | None = None,
    ) -> TurnOutcome:
        """Persist every host message not yet persisted (sequence = transcript position);
        `shapes`: the messages' validated shapes."""
        self._admit("AfterTurn")
        self.known.touch(identity)
        cleaned = CleanedTranscript(messages, shapes)
        counter = TokenCounter.for_model(model, self._default_encoding)
        last = len(messages) - 1

        def plan(state: StreamState) -> ClaimPlan | None:
            start = state.last_sequence + 1
            if start > last:
                return None
            return ClaimPlan(
                start,
                last,
                [
                    Candidate(i, cleaned[i].message, cleaned[i].used_context_uris)
                    for i in range(start, last + 1)
                ],
            )

        result, released, fired = await self._store(identity, plan, counter, token_budget, deadline)
        claimed = range(result.claimed_start, result.claimed_end + 1)
        outcome = TurnOutcome(
            persisted_count=len(result.persisted),
            duplicate_count=sum(
                1
                for i in range(pre_prompt_message_count, len(messages))
                if i not in claimed and not cleaned[i].injected
            ),
            injected_skipped_count=sum(cleaned[i].skipped for i in claimed),
            last_sequence=released.last_sequence,
            session_id=result.session_id,
            estimated_tokens=released.active_tokens,
            capture_worthy=capture_decision(
                _new_user_text(cleaned.tail(pre_prompt_message_count)), self._capture_max_length
            ).worthy,
        )
        self._after_write(identity, result.state, outcome, fired)
        return outcome

    async def commit_turn(
        self,
        identity: RequestIdentity,
        turn: FencedTurn,
        *,
        token_budget: int,
        model: str,
        deadline: float | None = None,
    ) -> TurnOutcome:
        """Store all of the turn's messages after the stream's last position, or none of them.

        The key is checked in the claim's compare-and-swap and recorded in the release's (or by
        the repair of a claim whose messages all landed): one OpenViking append per turn of up
        to 100 messages, so a replay, a concurrent delivery or a retry after a crash either
        finds the key committed (DUPLICATE) or stores the whole turn once. A longer turn takes
        several appends; if a crash cuts it short, the repair records how far it got
        (`partial_turn`) and the retry stores the rest: the turn ends up whole, once.
        """
        self._admit("CommitTurn")
        self.known.touch(identity)
        cleaned = clean_transcript(turn.messages)
        kept = [c for c in cleaned if c.message is not None]
        counter = TokenCounter.for_model(model, self._default_encoding)
        key = turn_key_digest(turn.advancement_key)
        provenance = turn_provenance(turn.advancement_key, turn.admission_json, turn.terminal_json)
        earlier: list[tuple[int, int]] = []

        def plan(state: StreamState) -> ClaimPlan | None:
            earlier.clear()
            committed = state.committed_turn(key)
            claimed = state.pending_write
            if committed is None and claimed and claimed.turn_key == key and claimed.outbox is not None:
                committed = CommittedTurn(  # claimed with its outbox: stored, whoever completes it
                    key=key, first_sequence=claimed.start_sequence, last_sequence=claimed.end_sequence
                )
            if committed is not None:
                earlier.append((committed.first_sequence, committed.last_sequence))
                return None
            partial = state.partial_turn if state.partial_turn and state.partial_turn.key == key else None
            rest = kept[partial.last_sequence - partial.first_sequence + 1 :] if partial else kept
            if not rest:
                return None
            start = state.last_sequence + 1
            candidates = [
                Candidate(start + i, c.message, c.used_context_uris, provenance) for i, c in enumerate(rest)
            ]
            return ClaimPlan(start, start + len(rest) - 1, candidates, turn_key=key)

        result, released, fired = await self._store(identity, plan, counter, token_budget, deadline)
        outcome = TurnOutcome(
            persisted_count=len(result.persisted),
            injected_skipped_count=sum(c.skipped for c in cleaned),
            last_sequence=released.last_sequence,
            session_id=result.session_id,
            estimated_tokens=released.active_tokens,
        )
        if earlier:
            outcome.duplicate_turn = True
            outcome.first_sequence, outcome.last_sequence = earlier[0]
            return outcome
        stored = result.state.committed_turn(key)
        if result.persisted and stored is not None:
            outcome.first_sequence, outcome.last_sequence = stored.first_sequence, stored.last_sequence
        outcome.capture_worthy = capture_decision(_new_user_text(cleaned), self._capture_max_length).worthy
        self._after_write(identity, result.state, outcome, fired)
        return outcome

    async def ingest(
        self,
        identity: RequestIdentity,
        messages: Sequence[common_pb2.ConversationMessage],
        *,
        only_if_new: bool = False,
        deadline: float | None = None,
    ) -> TurnOutcome:
        """Append messages after the stream's last position; host ids already stored are skipped.

        With `only_if_new` (a host's bootstrap import) nothing is stored once the stream has messages.
        """
        self._admit("Ingest")
        self.known.touch(identity)
        cleaned = clean_transcript(messages)
        counter = TokenCounter.for_model("", self._default_encoding)

        def plan(state: StreamState) -> ClaimPlan | None:
            if not messages or (only_if_new and state.last_sequence >= 0):
                return None
            start = state.last_sequence + 1
            return ClaimPlan(
                start,
                start + len(messages) - 1,
                [Candidate(start + i, c.message, c.used_context_uris) for i, c in enumerate(cleaned)],
            )

        result = await self._writer.write(identity, plan, counter, dedupe_host_ids=True, deadline=deadline)
        self._index_persisted(identity, result, bulk=True)
        return TurnOutcome(
            persisted_count=len(result.persisted),
            duplicate_count=result.host_id_duplicates,
            injected_skipped_count=sum(c.skipped for c in cleaned),
            last_sequence=result.state.last_sequence,
            session_id=result.session_id,
            estimated_tokens=result.state.active_tokens,
        )

    async def flush(
        self, identities: Sequence[RequestIdentity], *, deadline: float | None = None
    ) -> list[checkpoint_pb2.CompactCheckpoint]:
        """A FLUSH compaction for every stream with uncommitted turns (`services.capture.flush`)."""
        return await self._flush.flush(identities, deadline=deadline)
