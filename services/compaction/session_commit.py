"""Step 1 of a compaction (`services.compaction.worker`): its session committed exactly once.

A checkpoint whose session already has an archive was committed by an owner that died or was
cut off before recording it: that archive is the commit (`reconcile_commit`). Otherwise the
session is made whole first - a turn answered as stored and still in a claim's outbox is
completed into it, every exchange of it is in the turn index (capture's writes may have failed)
- and then committed. A session with nothing left to archive drops the hand-off: no checkpoint
remains. A refused commit fails the checkpoint and keeps the turns in the session; an unknown
outcome (OpenViking unavailable, timed out) is raised and the next step reconciles first.
"""

from __future__ import annotations

import logging

# Module imports, not names: see `services.compaction.worker`.
from services.capture import acknowledged
from services.compaction.transcript import session_turns
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore
from shared.domain.finalisation import (
    SummaryOf,
    attach_commit,
    mark_failed,
    reconcile_commit,
    stream_identity,
)
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.errors import Aborted, BackendError, BackendNotFound, BackendTimeout, BackendUnavailable
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

RETRIABLE = (BackendUnavailable, BackendTimeout, Aborted)
"""Errors whose outcome is unknown or passing: the worker retries its step."""


class SessionCommit:
    def __init__(
        self,
        openviking: OpenVikingClient,
        store: CheckpointStore,
        states: StreamStateStore,
        turns: acknowledged.AcknowledgedTurns,
        *,
        summary_of: SummaryOf,
        working_memory: bool | None,
        counter: TokenCounter,
    ) -> None:
        self._ov = openviking
        self._store = store
        self._states = states
        self._acknowledged = turns
        self._summary_of = summary_of
        self._working_memory = working_memory
        self._counter = counter
        self._index = TurnIndexWriter(openviking)

    async def __call__(self, identity: RequestIdentity, record: CheckpointRecord) -> CheckpointRecord | None:
        """Commit the hand-off's session (or record the commit OpenViking already made)."""
        tenant = identity.tenant
        summary_of = self._summary_of
        record = await reconcile_commit(self._ov, self._store, tenant, record, None, summary_of=summary_of)
        if record.archive_uri:
            return record
        # A turn answered as stored may still be in a claim's outbox on this session (its owner
        # died right after the claim): it is completed into the session first, or - while its
        # owner may still be appending - the commit waits for the next step (Aborted: retried).
        await self._acknowledged.complete(
            identity, self._counter, deadline=None, session_id=record.session_id, wait=False
        )
        await self._index_before_commit(tenant, record.session_id)
        try:
            result = await self._ov.commit_session(
                tenant, record.session_id, keep_recent_count=0, enable_working_memory=self._working_memory
            )
        except BackendNotFound:
            result = None
        except RETRIABLE:
            raise  # the outcome is unknown: the next step reconciles first
        except BackendError as exc:
            reason = f"commit refused, turns kept in session {record.session_id}: {exc.message}"
            return await mark_failed(self._ov, tenant, record.checkpoint_id, reason)
        if result is not None and result.status == "accepted" and result.archive_uri:
            attached = await attach_commit(
                self._ov,
                self._store,
                tenant,
                record.checkpoint_id,
                archive_uri=result.archive_uri,
                task_id=result.task_id or "",
                summary_of=summary_of,
            )
            return attached or record
        again = await reconcile_commit(self._ov, self._store, tenant, record, None, summary_of=summary_of)
        if again.archive_uri:
            return again
        log.info("compaction %s: nothing to archive in %s; dropped", record.checkpoint_id, record.session_id)
        await self._drop(stream_identity(tenant, record), record)
        return None

    async def _index_before_commit(self, tenant: Tenant, session_id: str) -> None:
        """Every exchange of the session findable before it is archived (capture's index writes may
        have failed); a failure here is logged and never blocks the commit."""
        try:
            turns = await session_turns(self._ov, tenant, session_id)
            written = await self._index.catch_up(tenant, session_id, turns)
        except Exception as exc:
            log.warning("turn index catch-up for session %s failed: %s", session_id, type(exc).__name__)
            return
        if written:
            log.info("turn index: %d exchange(s) of session %s indexed at compaction", written, session_id)

    async def _drop(self, identity: RequestIdentity, record: CheckpointRecord) -> None:
        """Forget a hand-off OpenViking had nothing to archive for."""

        def drop(state: StreamState) -> StreamState | None:
            if record.checkpoint_id not in state.checkpoint_ids and not any(
                e.checkpoint_id == record.checkpoint_id for e in state.inflight
            ):
                return None
            state.inflight = [e for e in state.inflight if e.checkpoint_id != record.checkpoint_id]
            state.checkpoint_ids = [c for c in state.checkpoint_ids if c != record.checkpoint_id]
            return state

        await self._states.update(identity, drop)
        try:
            await self._store.remove(identity.tenant, record.checkpoint_id)
        except BackendError as exc:
            log.warning("could not remove dropped checkpoint %s: %s", record.checkpoint_id, exc.message)
