"""Compact (docs/design.md §3.4): commit the stream's session as the formal sync point, record a checkpoint.

1. Hand off (`shared.domain.handoff`, one compare-and-swap on the stream state): new turns go to
   a fresh OpenViking session (generation + 1), the counters reset, the compaction is recorded
   as in flight. Capture does this itself when a trigger fires or on flush; an explicit
   Compact does it here, only when one of capture's triggers fires unless it says `force`
   (the proto's contract: a session below every threshold is not compacted).
2. The worker (`services.compaction.worker`) owns the hand-off to the end, in a task of this
   replica that no caller's deadline or cancellation cuts short: the PENDING checkpoint, the
   commit, phase 2, finalisation.
3. A background Compact (capture's nudge) returns as soon as the hand-offs it found are owned;
   a synchronous one waits (bounded) for phase 2 and answers with the working context.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2

from services.capture.triggers import TriggerThresholds, fired_trigger
from services.compaction.transcript import newest_turns
from services.compaction.worker import CompactionWorker
from shared.config import Settings
from shared.domain.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    Status,
    new_checkpoint_id,
    to_proto,
    utc_now,
)
from shared.domain.documents import DocumentStore
from shared.domain.envelope import texts_of
from shared.domain.handoff import hand_off, has_uncommitted_turns
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import InflightCompaction, StreamState, StreamStateStore
from shared.errors import Aborted
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

INJECTED_ID_PREFIX = "ce-injected-"
SUMMARY_HEADER = "[Session History Summary]"
SUMMARY_MARKER = {"contextengine_injected": "compact_summary"}
CLAIM_WAIT_SECONDS = 3.0
NOTHING_NEW = "nothing to compact: no turns since the last compaction"
BELOW_THRESHOLDS = "not compacted: no compaction threshold is reached (force=true compacts anyway)"
DEADLINE_MARGIN_SECONDS = 0.5


@dataclass(frozen=True)
class Claim:
    entry: InflightCompaction
    state: StreamState


def summary_message(checkpoint_id: str, summary: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=f"{INJECTED_ID_PREFIX}compact-summary-{checkpoint_id}",
        role=common_pb2.MESSAGE_ROLE_USER,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=f"{SUMMARY_HEADER}\n{summary}"))],
        host_fields=common_pb2.JsonValue(json=json.dumps(SUMMARY_MARKER)),
    )


class Compactor:
    def __init__(
        self,
        settings: Settings,
        openviking: OpenVikingClient,
        worker: CompactionWorker,
    ) -> None:
        self._settings = settings
        self._ov = openviking
        self._worker = worker
        documents = DocumentStore(openviking)
        self._states = StreamStateStore(documents)
        self._checkpoints = CheckpointStore(documents)
        self._thresholds = TriggerThresholds.from_settings(settings)

    def _below_every_threshold(self, state: StreamState, request: compaction_pb2.CompactRequest) -> bool:
        """No compaction trigger fires for the stream (the host's own token count counts too)."""
        tokens = max(state.active_tokens, request.current_token_count)
        counted = state.model_copy(update={"active_tokens": tokens})
        fired = fired_trigger(counted, self._thresholds, token_budget=request.token_budget, now=utc_now())
        return fired == checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED

    async def _claim(
        self,
        identity: RequestIdentity,
        request: compaction_pb2.CompactRequest,
        traceparent: str,
        deadline: float,
    ) -> Claim | str:
        """The hand-off this call made, or why it made none."""
        checkpoint_id = new_checkpoint_id(identity.stream_id)
        give_up_at = time.monotonic() + CLAIM_WAIT_SECONDS
        refused: list[str] = []

        def claim(state: StreamState) -> StreamState | None:
            refused.clear()
            if not has_uncommitted_turns(state) and not request.force:
                refused.append(NOTHING_NEW)
                return None
            if not request.force and self._below_every_threshold(state, request):
                refused.append(BELOW_THRESHOLDS)
                return None
            result = hand_off(
                state,
                checkpoint_id,
                now=utc_now(),
                trigger=request.trigger,
                force=request.force,
                tokens_before=request.current_token_count,
                traceparent=traceparent,
            )
            if result is None:
                refused.append(NOTHING_NEW)
            return result if isinstance(result, StreamState) else None

        while True:
            state, written = await self._states.update(identity, claim, deadline=deadline)
            if written:
                return Claim(state.inflight[-1], state)
            if refused:
                return refused[0]
            if time.monotonic() > give_up_at:
                raise Aborted("a turn is being written to the session; retry the compaction")
            await asyncio.sleep(0.1)

    async def compact(
        self,
        identity: RequestIdentity,
        request: compaction_pb2.CompactRequest,
        *,
        traceparent: str,
        deadline: float,
    ) -> compaction_pb2.CompactResponse:
        owned = await self._worker.own_stream(identity, deadline=deadline)
        handed_off = [r for r in owned if not r.is_terminal]
        if request.resume_only:
            if not handed_off:
                return compaction_pb2.CompactResponse(ok=True, compacted=False, reason="nothing handed off")
            return self._pending(handed_off[-1], 0)
        claim = await self._claim(identity, request, traceparent, deadline)
        if isinstance(claim, str):
            return compaction_pb2.CompactResponse(ok=True, compacted=False, reason=claim)
        record = await self._worker.own(identity, claim.entry, deadline=deadline)
        tokens_before = claim.entry.tokens_before
        if request.background:
            return self._pending(record, tokens_before)
        wait_until = min(
            deadline - DEADLINE_MARGIN_SECONDS,
            time.monotonic() + self._settings.compact_task_timeout_ms / 1000.0,
        )
        await self._worker.wait(record.checkpoint_id, wait_until - time.monotonic())
        return await self._answer(identity.tenant, claim, request.model, deadline)

    async def _answer(
        self, tenant: Tenant, claim: Claim, model: str, deadline: float
    ) -> compaction_pb2.CompactResponse:
        """A synchronous Compact's answer, from the checkpoint as stored after the wait."""
        tokens_before = claim.entry.tokens_before
        stored = await self._checkpoints.read(tenant, claim.entry.checkpoint_id, deadline=deadline)
        if stored is None:
            return compaction_pb2.CompactResponse(
                ok=True,
                compacted=False,
                reason="nothing to compact: OpenViking skipped the commit (no_messages)",
            )
        if stored.status == Status.CHECKPOINT_STATUS_FAILED and not stored.archive_uri:
            return compaction_pb2.CompactResponse(
                ok=False,
                compacted=False,
                reason=stored.failure_reason,
                checkpoint=to_proto(stored),
                tokens_before=tokens_before,
                tokens_after=tokens_before,
            )
        if not stored.archive_uri:
            return self._pending(stored, tokens_before)
        return await self._working_context(
            tenant, claim.state, stored, model=model, tokens_before=tokens_before, deadline=deadline
        )

    @staticmethod
    def _pending(record: CheckpointRecord, tokens_before: int) -> compaction_pb2.CompactResponse:
        return compaction_pb2.CompactResponse(
            ok=True,
            compacted=True,
            reason="handed off; the commit, summary and memory extraction finish in the background",
            checkpoint=to_proto(record),
            tokens_before=tokens_before,
        )

    async def _latest_summary(
        self, tenant: Tenant, state: StreamState, record: CheckpointRecord, deadline: float
    ) -> tuple[str, str]:
        """(checkpoint id, summary) of the newest checkpoint with a summary: OpenViking's, or the
        engine's own (written at commit, LLM or not)."""
        if record.shown_summary:
            return record.checkpoint_id, record.shown_summary
        for checkpoint_id in reversed(state.checkpoint_ids[-10:]):
            if checkpoint_id == record.checkpoint_id:
                continue
            older = await self._checkpoints.read(tenant, checkpoint_id, deadline=deadline)
            completed = older is not None and older.status == Status.CHECKPOINT_STATUS_COMPLETED
            if older is not None and completed and older.shown_summary:
                return older.checkpoint_id, older.shown_summary
        return "", ""

    async def _working_context(
        self,
        tenant: Tenant,
        state: StreamState,
        record: CheckpointRecord,
        *,
        model: str,
        tokens_before: int,
        deadline: float,
    ) -> compaction_pb2.CompactResponse:
        summary_id, summary = await self._latest_summary(tenant, state, record, deadline)
        messages: list[common_pb2.ConversationMessage] = []
        if summary:
            messages.append(summary_message(summary_id, summary))
        raw = await newest_turns(
            self._ov, tenant, state.sessions, self._settings.recent_raw_turn_count, deadline=deadline
        )
        messages += [turn.message for _session, turn in raw]
        counter = TokenCounter.for_model(model, self._settings.default_encoding)
        tokens_after = sum(counter.count_message(texts_of(m)) for m in messages)
        status = record.status
        if status == Status.CHECKPOINT_STATUS_COMPLETED:
            reason = "committed"
        elif status == Status.CHECKPOINT_STATUS_FAILED:
            reason = f"committed; summary/extraction failed, raw turns kept: {record.failure_reason}"
        else:
            reason = "committed; summary and memory extraction still running"
        return compaction_pb2.CompactResponse(
            ok=True,
            compacted=True,
            reason=reason,
            checkpoint=to_proto(record),
            messages=messages,
            summary=summary,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
        )
