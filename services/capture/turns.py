"""AfterTurn and Ingest as plain async logic: persist, count, evaluate triggers, start compactions."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from contextengine.v1 import checkpoint_pb2, common_pb2

from services.capture.compaction_client import CompactionStarter
from services.capture.decision import capture_decision
from services.capture.injections import CleanedMessage, clean_transcript
from services.capture.transcript import Candidate, ClaimPlan, TranscriptWriter, WriteResult
from services.capture.triggers import TriggerThresholds, fired_trigger
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore, utc_now
from shared.domain.turn_index import IndexedMessage
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

Role = common_pb2.MessageRole
Trigger = checkpoint_pb2.CompactionTrigger

InflightConfirmer = Callable[[RequestIdentity, StreamState, "float | None"], Awaitable[None]]
"""Confirms the stream's in-flight compactions (design §3.2 step 0) before a write."""


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


def has_uncommitted_turns(state: StreamState) -> bool:
    return state.turns_since_compaction > 0 or state.tokens_since_compaction > 0


def compaction_inflight_for_active(state: StreamState) -> bool:
    return any(c.session_id == state.active_session for c in state.inflight)


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
        compactions: CompactionStarter,
        thresholds: TriggerThresholds,
        *,
        default_encoding: str,
        capture_max_length: int,
        confirm_inflight: InflightConfirmer | None = None,
        index: TurnIndexWriter | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._states = states
        self._writer = writer
        self._compactions = compactions
        self._thresholds = thresholds
        self._default_encoding = default_encoding
        self._capture_max_length = capture_max_length
        self._confirm_inflight = confirm_inflight
        self._index = index
        self._clock = clock
        self.known = KnownStreams()

    async def _before_write(self, identity: RequestIdentity, deadline: float | None) -> None:
        self.known.touch(identity)
        if self._confirm_inflight is None:
            return
        state = await self._states.load(identity, deadline=deadline)
        if state is not None and state.inflight:
            await self._confirm_inflight(identity, state, deadline)

    async def _index_persisted(
        self, identity: RequestIdentity, result: WriteResult, deadline: float | None
    ) -> None:
        """Make what this call stored findable (the turn index); never fails the turn."""
        if self._index is None:
            return
        stored = [IndexedMessage(c.sequence, c.message) for c in result.persisted if c.message is not None]
        if stored:
            await self._index.add(identity.tenant, result.session_id, stored, deadline=deadline)

    async def after_turn(
        self,
        identity: RequestIdentity,
        messages: Sequence[common_pb2.ConversationMessage],
        pre_prompt_message_count: int,
        *,
        token_budget: int,
        model: str,
        deadline: float | None = None,
    ) -> TurnOutcome:
        """Persist every host message not yet persisted (sequence = transcript position)."""
        await self._before_write(identity, deadline)
        cleaned = clean_transcript(messages)
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

        result = await self._writer.write(identity, plan, counter, deadline=deadline)
        await self._index_persisted(identity, result, deadline)
        claimed = range(result.claimed_start, result.claimed_end + 1)
        outcome = TurnOutcome(
            persisted_count=len(result.persisted),
            duplicate_count=sum(
                1
                for i in range(pre_prompt_message_count, len(messages))
                if i not in claimed and not cleaned[i].injected
            ),
            injected_skipped_count=sum(cleaned[i].skipped for i in claimed),
            last_sequence=result.state.last_sequence,
            session_id=result.session_id,
            estimated_tokens=result.state.active_tokens,
            capture_worthy=capture_decision(
                _new_user_text(cleaned[pre_prompt_message_count:]), self._capture_max_length
            ).worthy,
        )
        await self._maybe_compact(identity, result.state, outcome, token_budget=token_budget, model=model)
        return outcome

    async def ingest(
        self,
        identity: RequestIdentity,
        messages: Sequence[common_pb2.ConversationMessage],
        *,
        deadline: float | None = None,
    ) -> TurnOutcome:
        """Append messages after the stream's last position; host ids already stored are skipped."""
        await self._before_write(identity, deadline)
        cleaned = clean_transcript(messages)
        counter = TokenCounter.for_model("", self._default_encoding)

        def plan(state: StreamState) -> ClaimPlan | None:
            if not messages:
                return None
            start = state.last_sequence + 1
            return ClaimPlan(
                start,
                start + len(messages) - 1,
                [Candidate(start + i, c.message, c.used_context_uris) for i, c in enumerate(cleaned)],
            )

        result = await self._writer.write(identity, plan, counter, dedupe_host_ids=True, deadline=deadline)
        await self._index_persisted(identity, result, deadline)
        return TurnOutcome(
            persisted_count=len(result.persisted),
            duplicate_count=result.host_id_duplicates,
            injected_skipped_count=sum(c.skipped for c in cleaned),
            last_sequence=result.state.last_sequence,
            session_id=result.session_id,
            estimated_tokens=result.state.active_tokens,
        )

    async def _maybe_compact(
        self,
        identity: RequestIdentity,
        state: StreamState,
        outcome: TurnOutcome,
        *,
        token_budget: int,
        model: str,
    ) -> None:
        trigger = fired_trigger(state, self._thresholds, token_budget=token_budget, now=self._clock())
        if trigger == checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED or compaction_inflight_for_active(state):
            return
        try:
            response = await self._compactions.start(
                identity, trigger, token_budget=token_budget, current_tokens=state.active_tokens, model=model
            )
        except Exception:  # the next turn re-evaluates; the write already succeeded
            log.warning("background compaction of %s (%s) failed to start", identity.buffer_key,
                        Trigger.Name(trigger), exc_info=True)  # fmt: skip
            return
        outcome.trigger = trigger
        outcome.checkpoint_id = response.checkpoint.checkpoint_id

    async def flush(
        self, identities: Sequence[RequestIdentity], *, deadline: float | None = None
    ) -> list[checkpoint_pb2.CompactCheckpoint]:
        """Start a FLUSH compaction for every stream with uncommitted turns, concurrently.

        Every stream is tried; the first failure is raised after all have been tried.
        """
        results = await asyncio.gather(
            *(self._flush_one(identity, deadline) for identity in identities), return_exceptions=True
        )
        checkpoints = [r for r in results if isinstance(r, checkpoint_pb2.CompactCheckpoint)]
        failures = [r for r in results if isinstance(r, BaseException)]
        for identity, result in zip(identities, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("flush of %s failed: %s", identity.buffer_key, result)
        if failures:
            raise failures[0]
        return checkpoints

    async def _flush_one(
        self, identity: RequestIdentity, deadline: float | None
    ) -> checkpoint_pb2.CompactCheckpoint | None:
        state = await self._states.load(identity, deadline=deadline)
        if state is None or not has_uncommitted_turns(state) or compaction_inflight_for_active(state):
            return None
        timeout = None if deadline is None else max(0.1, deadline - time.monotonic())
        response = await self._compactions.start(
            identity,
            checkpoint_pb2.COMPACTION_TRIGGER_FLUSH,
            current_tokens=state.active_tokens,
            call_timeout=timeout,
        )
        return response.checkpoint if response.HasField("checkpoint") else None
