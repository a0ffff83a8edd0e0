"""Compact (design §3.4): commit the stream's session as the formal sync point, record a checkpoint.

1. Claim (compare-and-swap on the stream state): new turns go to a fresh OpenViking session
   (generation + 1), the counters reset, the compaction is recorded as in flight.
2. Commit the old session (keep nothing live: the engine keeps its own raw window) and store
   the PENDING checkpoint with the archived turn range.
3. Wait for phase 2 (bounded) and finalise, or hand that to a background task. Any replica that
   later sees the in-flight entry finalises it (`shared.domain.checkpoints.finalise`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass

from contextengine.v1 import common_pb2, compaction_pb2

from services.compaction.transcript import newest_turns, session_turns
from shared.config import Settings
from shared.domain.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    Status,
    archive_index_of,
    checkpoint_uri,
    finalise,
    finalise_inflight,
    mark_failed,
    new_checkpoint_id,
    read_archive_turns,
    to_proto,
    utc_now,
)
from shared.domain.documents import DocumentStore
from shared.domain.envelope import texts_of
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import InflightCompaction, StreamState, StreamStateStore, session_id_for
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.errors import Aborted, BackendError, BackendNotFound, BackendTimeout
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

INJECTED_ID_PREFIX = "ce-injected-"
SUMMARY_HEADER = "[Session History Summary]"
SUMMARY_MARKER = {"contextengine_injected": "compact_summary"}
WRITE_IN_PROGRESS_GRACE_SECONDS = 10.0
"""A capture append claimed this recently on the active session is waited for before switching."""
CLAIM_WAIT_SECONDS = 3.0
BACKGROUND_WAIT_FACTOR = 5
"""Background finalisers wait this many compactTaskTimeoutMs for phase 2 before giving up."""
DEADLINE_MARGIN_SECONDS = 0.5


@dataclass(frozen=True)
class Claim:
    checkpoint_id: str
    session_id: str
    tokens_before: int
    state: StreamState


class Finalisers:
    """Background finalisation tasks of this replica (cancelled on shutdown; others pick up)."""

    def __init__(self, openviking: OpenVikingClient, wait_seconds: float) -> None:
        self._openviking = openviking
        self._wait_seconds = wait_seconds
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, tenant: Tenant, checkpoint_id: str, task_id: str) -> asyncio.Task[None]:
        task = asyncio.create_task(
            self._run(tenant, checkpoint_id, task_id), name=f"finalise-{checkpoint_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, tenant: Tenant, checkpoint_id: str, task_id: str) -> None:
        try:
            await self._openviking.wait_for_task(
                tenant, task_id, time.monotonic() + self._wait_seconds, max_poll_interval=1.0
            )
            await finalise(self._openviking, tenant, checkpoint_id, deadline=time.monotonic() + 120)
        except (BackendError, Aborted) as exc:
            log.warning("background finalisation of %s stopped: %s", checkpoint_id, exc.message)
        except Exception:  # the next observer finalises it; never let a task die silently
            log.exception("background finalisation of %s failed", checkpoint_id)

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def shutdown(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
        finalisers: Finalisers,
        *,
        enable_working_memory: bool | None,
    ) -> None:
        self._settings = settings
        self._ov = openviking
        self._finalisers = finalisers
        self._working_memory = enable_working_memory
        documents = DocumentStore(openviking)
        self._states = StreamStateStore(documents)
        self._checkpoints = CheckpointStore(documents)
        self._documents = documents
        self._index = TurnIndexWriter(openviking)

    @staticmethod
    def _switch(state: StreamState, checkpoint_id: str, force: bool) -> StreamState | bool | None:
        """Move new turns to a fresh session; None: nothing to compact; False: a write is in progress."""
        if state.turns_since_compaction == 0 and not force:
            return None
        pending = state.pending_write
        if (
            pending is not None
            and pending.session_id == state.active_session
            and (utc_now() - pending.claimed_at).total_seconds() < WRITE_IN_PROGRESS_GRACE_SECONDS
        ):
            return False
        old_session = state.active_session
        state.generation += 1
        state.active_session = session_id_for(state.stream_id, state.generation)
        state.sessions.append(state.active_session)
        state.turns_since_compaction = 0
        state.tokens_since_compaction = 0
        state.active_tokens = 0
        state.last_compaction_at = utc_now()
        state.inflight.append(
            InflightCompaction(checkpoint_id=checkpoint_id, session_id=old_session, started_at=utc_now())
        )
        state.checkpoint_ids.append(checkpoint_id)
        return state

    async def _claim(
        self, identity: RequestIdentity, force: bool, deadline: float
    ) -> tuple[Claim | None, StreamState]:
        checkpoint_id = new_checkpoint_id(identity.stream_id)
        give_up_at = time.monotonic() + CLAIM_WAIT_SECONDS
        outcome: list[StreamState | bool | None] = []
        tokens_before: list[int] = []

        def claim(state: StreamState) -> StreamState | None:
            tokens_before[:] = [state.active_tokens]
            result = self._switch(state, checkpoint_id, force)
            outcome[:] = [result]
            return result if isinstance(result, StreamState) else None

        while True:
            outcome.clear()
            state, written = await self._states.update(identity, claim, deadline=deadline)
            if written:
                old = state.inflight[-1].session_id
                return Claim(checkpoint_id, old, tokens_before[0], state), state
            if outcome and outcome[0] is not False:
                return None, state
            if time.monotonic() > give_up_at:
                raise Aborted("a turn is being written to the session; retry the compaction")
            await asyncio.sleep(0.1)

    async def _unclaim(self, identity: RequestIdentity, checkpoint_id: str, deadline: float) -> None:
        """Forget a compaction OpenViking skipped (nothing to archive)."""

        def drop(state: StreamState) -> StreamState:
            state.inflight = [e for e in state.inflight if e.checkpoint_id != checkpoint_id]
            state.checkpoint_ids = [c for c in state.checkpoint_ids if c != checkpoint_id]
            return state

        await self._states.update(identity, drop, deadline=deadline)

    async def compact(
        self,
        identity: RequestIdentity,
        request: compaction_pb2.CompactRequest,
        *,
        traceparent: str,
        deadline: float,
    ) -> compaction_pb2.CompactResponse:
        tenant = identity.tenant
        existing = await self._states.load(identity, deadline=deadline)
        if existing is not None and existing.inflight:
            await finalise_inflight(self._ov, identity, existing.inflight, deadline=deadline)
        claim, state = await self._claim(identity, request.force, deadline)
        if claim is None:
            return compaction_pb2.CompactResponse(
                ok=True, compacted=False, reason="nothing to compact: no turns since the last compaction"
            )
        record = CheckpointRecord(
            checkpoint_id=claim.checkpoint_id,
            stream_id=identity.stream_id,
            session_id=claim.session_id,
            host_session_id=identity.session_id,
            agent_id=identity.agent_id,
            trigger=request.trigger,
            origin_traceparent=traceparent,
        )
        await self._checkpoints.create(tenant, record, deadline=deadline)
        tokens_before = request.current_token_count or claim.tokens_before
        await self._index_before_commit(tenant, claim.session_id, deadline)
        try:
            result = await self._ov.commit_session(
                tenant,
                claim.session_id,
                keep_recent_count=0,
                enable_working_memory=self._working_memory,
                deadline=deadline,
            )
        except BackendNotFound:
            result = None
        except BackendError as exc:
            failed = await mark_failed(
                self._ov, tenant, claim.checkpoint_id, f"commit failed: {exc.message}", deadline=None
            )
            return compaction_pb2.CompactResponse(
                ok=False,
                compacted=False,
                reason=f"commit failed, turns kept in session {claim.session_id}: {exc.message}",
                checkpoint=to_proto(failed or record),
                tokens_before=tokens_before,
                tokens_after=tokens_before,
            )
        if result is None or result.status != "accepted" or not result.task_id or not result.archive_uri:
            await self._unclaim(identity, claim.checkpoint_id, deadline)
            await self._remove_document(tenant, claim.checkpoint_id, claim.state.stream_id, deadline)
            why = result.reason if result is not None and result.reason else "no_messages"
            return compaction_pb2.CompactResponse(
                ok=True, compacted=False, reason=f"nothing to compact: OpenViking skipped the commit ({why})"
            )
        record = await self._record_commit(tenant, claim, result.task_id, result.archive_uri, deadline)
        if request.background:
            self._finalisers.spawn(tenant, record.checkpoint_id, record.task_id)
            return compaction_pb2.CompactResponse(
                ok=True,
                compacted=True,
                reason="committed; summary and memory extraction finish in the background",
                checkpoint=to_proto(record),
                tokens_before=tokens_before,
            )
        record = await self._wait_and_finalise(tenant, record, deadline)
        return await self._working_context(
            tenant, state, record, model=request.model, tokens_before=tokens_before, deadline=deadline
        )

    async def _index_before_commit(self, tenant: Tenant, session_id: str, deadline: float) -> None:
        """Every exchange of the session findable before it is archived (capture's index writes may
        have failed); a failure here is logged and never blocks the commit."""
        try:
            turns = await session_turns(self._ov, tenant, session_id, deadline=deadline)
            written = await self._index.catch_up(tenant, session_id, turns, deadline=deadline)
        except Exception as exc:
            log.warning("turn index catch-up for session %s failed: %s", session_id, type(exc).__name__)
            return
        if written:
            log.info("turn index: %d exchange(s) of session %s indexed at compaction", written, session_id)

    async def _remove_document(
        self, tenant: Tenant, checkpoint_id: str, stream_id: str, deadline: float
    ) -> None:
        try:
            await self._ov.rm(tenant, checkpoint_uri(stream_id, checkpoint_id), deadline=deadline)
        except BackendError as exc:
            log.warning("could not remove skipped checkpoint %s: %s", checkpoint_id, exc.message)

    async def _record_commit(
        self, tenant: Tenant, claim: Claim, task_id: str, archive_uri: str, deadline: float
    ) -> CheckpointRecord:
        turns = await read_archive_turns(self._ov, tenant, archive_uri, deadline=deadline)
        committed_at = utc_now()

        def attach(current: CheckpointRecord) -> CheckpointRecord:
            current.task_id = task_id
            current.archive_uri = archive_uri
            current.archive_index = archive_index_of(archive_uri)
            current.committed_at = committed_at
            current.turn_ids = [t.turn_id for t in turns]
            if turns:
                current.start_sequence = turns[0].sequence
                current.end_sequence = turns[-1].sequence
            return current

        record = await self._checkpoints.update(tenant, claim.checkpoint_id, attach, deadline=deadline)
        if record is None:
            raise Aborted(f"checkpoint {claim.checkpoint_id} vanished while committing")

        def note_task(state: StreamState) -> StreamState | None:
            for entry in state.inflight:
                if entry.checkpoint_id == claim.checkpoint_id and not entry.task_id:
                    entry.task_id = task_id
                    return state
            return None

        identity = RequestIdentity(tenant, claim.state.agent_id, claim.state.host_session_id, "")
        await self._states.update(identity, note_task, deadline=deadline)
        return record

    async def _wait_and_finalise(
        self, tenant: Tenant, record: CheckpointRecord, deadline: float
    ) -> CheckpointRecord:
        wait_until = min(
            deadline - DEADLINE_MARGIN_SECONDS,
            time.monotonic() + self._settings.compact_task_timeout_ms / 1000.0,
        )
        try:
            await self._ov.wait_for_task(tenant, record.task_id, wait_until)
        except BackendTimeout:
            log.info("phase 2 of %s still running; finalising in the background", record.checkpoint_id)
            self._finalisers.spawn(tenant, record.checkpoint_id, record.task_id)
            return record
        return await finalise(self._ov, tenant, record.checkpoint_id, deadline=deadline) or record

    async def _latest_summary(
        self, tenant: Tenant, state: StreamState, record: CheckpointRecord, deadline: float
    ) -> tuple[str, str]:
        """(checkpoint id, summary) of the newest completed checkpoint that has a summary."""
        if record.summary:
            return record.checkpoint_id, record.summary
        for checkpoint_id in reversed(state.checkpoint_ids[-10:]):
            if checkpoint_id == record.checkpoint_id:
                continue
            older = await self._checkpoints.read(tenant, checkpoint_id, deadline=deadline)
            if older is not None and older.status == Status.CHECKPOINT_STATUS_COMPLETED and older.summary:
                return older.checkpoint_id, older.summary
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
