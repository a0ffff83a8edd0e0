"""The compaction worker: owns every handed-off compaction to the end, on any replica.

A hand-off (`shared.domain.handoff`) is durable in the stream state before the call that made it
returns. `own` gives it its PENDING checkpoint document and, under a lease in that document,
a task of this replica - never of the call that asked - which:

1. reconciles the checkpoint with OpenViking: a session that already has an archive was
   committed (by an owner that died or was cut off before recording it): that archive is the
   commit; otherwise it commits the session now (nothing left to archive: the hand-off is
   dropped, no checkpoint remains; `services.compaction.session_commit`);
2. writes the engine's own summary of the archived turns into the checkpoint
   (`services.compaction.engine_summary`; LLM-free, so a continuing session keeps its past even
   when OpenViking writes no summary), and the summary of the stream's earlier checkpoints
   (`services.compaction.history`);
3. polls until OpenViking's phase 2 ended and finalises the checkpoint (COMPLETED or FAILED,
   `shared.domain.finalisation.finalise`); transient OpenViking errors are retried.

The lease (`LEASE_SECONDS`, renewed every `RENEW_SECONDS`) keeps two replicas from working on
one checkpoint; shutdown releases it. A hand-off whose owner died is resumed within
`RESUME_BOUND_SECONDS` by any compaction replica that has seen its stream (the sweep), and
by whichever replica the next call touching the stream reaches (capture nudges compaction when
it sees an in-flight compaction; Compact, GetCheckpoint and ListCheckpoints own what they see).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from datetime import datetime, timedelta

# Module imports, not names: capture imports `services.compaction.transcript`, so these
# modules may be half-initialised when this one is imported; their names are read at run time.
from services.capture import acknowledged, claim_repair
from services.compaction import session_commit
from services.compaction.engine_summary import EngineSummariser
from services.compaction.history import HistorySummariser
from shared.domain.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    stream_of_checkpoint,
    utc_now,
)
from shared.domain.documents import DocumentStore
from shared.domain.finalisation import (
    finalise,
    forget_inflight,
    stream_identity,
)
from shared.domain.identity import RequestIdentity
from shared.domain.memory_changes import MemoryChanges
from shared.domain.stream_state import InflightCompaction, StreamState, StreamStateStore
from shared.errors import Aborted, BackendError
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

LEASE_SECONDS = 15.0
"""A checkpoint whose owner stopped renewing for this long may be taken over."""
RENEW_SECONDS = 5.0
SWEEP_SECONDS = 5.0
"""How often a replica looks for hand-offs left without a live owner on the streams it knows."""
RESUME_BOUND_SECONDS = LEASE_SECONDS + SWEEP_SECONDS
"""A hand-off whose owner died is resumed within this long (see the module docstring)."""
POLL_SECONDS = (0.25, 2.0)
"""First and longest pause between two looks at OpenViking's phase 2 (and retries)."""
PHASE2_WAIT_FACTOR = 5
"""An owner polls phase 2 for this many `compactTaskTimeoutMs`, then leaves it to the next owner."""

_RETRIABLE = session_commit.RETRIABLE


def replica_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def new_record(identity: RequestIdentity, entry: InflightCompaction) -> CheckpointRecord:
    """The PENDING checkpoint of a hand-off."""
    return CheckpointRecord(
        checkpoint_id=entry.checkpoint_id,
        stream_id=identity.stream_id,
        session_id=entry.session_id,
        host_session_id=identity.session_id,
        agent_id=identity.agent_id,
        trigger=entry.trigger,
        created_at=entry.started_at,
        origin_traceparent=entry.origin_traceparent,
    )


class CompactionWorker:
    def __init__(
        self,
        openviking: OpenVikingClient,
        *,
        enable_working_memory: bool | None,
        phase2_wait_seconds: float,
        summary_max_tokens: int,
        encoding: str,
        shutdown_wait_seconds: float = 5.0,
        memory_changes: MemoryChanges | None = None,
    ) -> None:
        self._ov = openviking
        self._memory_changes = memory_changes or MemoryChanges()
        self._shutdown_wait = shutdown_wait_seconds
        self._committed: dict[str, asyncio.Event] = {}
        self._phase2_wait = phase2_wait_seconds
        documents = DocumentStore(openviking)
        self._store = CheckpointStore(documents)
        self._states = StreamStateStore(documents)
        self._summariser = EngineSummariser(
            openviking, self._store, max_tokens=summary_max_tokens, encoding=encoding
        )
        self._history = HistorySummariser(
            self._store, self._states, self._summariser, max_tokens=summary_max_tokens, encoding=encoding
        )
        repair = claim_repair.ClaimRepair(openviking, self._states, utc_now)
        self._commit = session_commit.SessionCommit(
            openviking,
            self._store,
            self._states,
            acknowledged.AcknowledgedTurns(self._states, repair, utc_now),
            summary_of=self._summariser.summary_of,
            working_memory=enable_working_memory,
            counter=TokenCounter.for_model("", encoding),
        )
        self.name = replica_name()
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._owning: dict[str, asyncio.Lock] = {}
        self._known: dict[str, RequestIdentity] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def running(self) -> int:
        return len(self._jobs)

    async def own_stream(
        self, identity: RequestIdentity, *, deadline: float | None = None
    ) -> list[CheckpointRecord]:
        """Own every compaction handed off on the stream; their checkpoints as stored."""
        state = await self._states.load(identity, deadline=deadline)
        if state is None:
            return []
        return await self.own_all(identity, state, deadline=deadline)

    async def own_all(
        self, identity: RequestIdentity, state: StreamState, *, deadline: float | None = None
    ) -> list[CheckpointRecord]:
        return [await self.own(identity, entry, deadline=deadline) for entry in state.inflight]

    async def own_by_id(
        self, tenant: Tenant, checkpoint_id: str, *, deadline: float | None = None
    ) -> CheckpointRecord | None:
        """Own a hand-off known only by its checkpoint id (its document may not exist yet)."""
        stream_id = stream_of_checkpoint(checkpoint_id)
        if stream_id is None:
            return None
        state = await self._states.load_stream(tenant, stream_id, deadline=deadline)
        if state is None:
            return None
        entry = next((e for e in state.inflight if e.checkpoint_id == checkpoint_id), None)
        if entry is None:
            return None
        identity = RequestIdentity(tenant, state.agent_id, state.host_session_id, "")
        return await self.own(identity, entry, deadline=deadline)

    async def own(
        self, identity: RequestIdentity, entry: InflightCompaction, *, deadline: float | None = None
    ) -> CheckpointRecord:
        """Make sure the hand-off has its checkpoint and a live owner (this replica unless another
        holds the lease); returns the checkpoint as stored."""
        self._remember(identity)
        lock = self._owning.setdefault(entry.checkpoint_id, asyncio.Lock())
        try:
            async with lock:  # the sweep and a nudge may ask at once
                return await self._own(identity, entry, deadline)
        finally:
            if not lock.locked():
                self._owning.pop(entry.checkpoint_id, None)

    async def _own(
        self, identity: RequestIdentity, entry: InflightCompaction, deadline: float | None
    ) -> CheckpointRecord:
        tenant = identity.tenant
        created = new_record(identity, entry)
        if entry.checkpoint_id not in self._jobs and not self._closing:
            created = self._leased(created, utc_now())  # created here, it is created leased
        record = await self._store.create(tenant, created, deadline=deadline)
        if record is None:  # another caller is still creating it: the sweep comes back to it
            return new_record(identity, entry)
        if record.is_terminal:
            await forget_inflight(self._states, identity, entry.checkpoint_id, deadline)
            return record
        if entry.checkpoint_id in self._jobs or self._closing:
            if record is created and created.owner:  # began closing while creating it
                await self._release_lease(tenant, entry.checkpoint_id)
            return record
        taken = record if record is created else await self._take_lease(tenant, entry.checkpoint_id, deadline)
        if taken is None or taken.owner != self.name:
            return taken or record
        if entry.checkpoint_id not in self._jobs:
            self._committed[entry.checkpoint_id] = asyncio.Event()
            job = asyncio.create_task(
                self._run(identity, entry.checkpoint_id), name=f"compact-{entry.checkpoint_id}"
            )
            self._jobs[entry.checkpoint_id] = job
            job.add_done_callback(lambda _: self._forget_job(entry.checkpoint_id))
        return taken

    def _forget_job(self, checkpoint_id: str) -> None:
        self._jobs.pop(checkpoint_id, None)
        self._committed.pop(checkpoint_id, None)

    async def wait(self, checkpoint_id: str, seconds: float) -> None:
        """Wait (at most `seconds`) for this replica's work on the checkpoint; never cancels it."""
        job = self._jobs.get(checkpoint_id)
        if job is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(job), max(0.0, seconds))
        except TimeoutError:
            return

    def _remember(self, identity: RequestIdentity) -> None:
        self._known[identity.buffer_key] = identity
        if self._sweeper is None and not self._closing:
            self._sweeper = asyncio.create_task(self._sweep(), name="compaction-sweep")

    async def _take_lease(
        self, tenant: Tenant, checkpoint_id: str, deadline: float | None
    ) -> CheckpointRecord | None:
        now = utc_now()

        def take(current: CheckpointRecord) -> CheckpointRecord | None:
            if current.is_terminal:
                return None
            held = current.owner and current.lease_until is not None and current.lease_until > now
            if held and current.owner != self.name:
                return None
            return self._leased(current, now)

        return await self._store.update(tenant, checkpoint_id, take, deadline=deadline)

    def _leased(self, record: CheckpointRecord, now: datetime) -> CheckpointRecord:
        record.owner = self.name
        record.lease_until = now + timedelta(seconds=LEASE_SECONDS)
        return record

    async def _release_lease(self, tenant: Tenant, checkpoint_id: str) -> None:
        def release(current: CheckpointRecord) -> CheckpointRecord | None:
            if current.owner != self.name:
                return None
            current.owner = ""
            current.lease_until = None
            return current

        try:
            await self._store.update(tenant, checkpoint_id, release)
        except (BackendError, Aborted) as exc:  # it expires on its own
            log.warning("could not release the lease of %s: %s", checkpoint_id, exc.message)

    async def _run(self, identity: RequestIdentity, checkpoint_id: str) -> None:
        tenant = identity.tenant
        give_up = time.monotonic() + self._phase2_wait
        renewed = time.monotonic()
        pause = POLL_SECONDS[0]
        done = False
        try:
            while time.monotonic() < give_up:
                try:  # a step runs only under a renewed lease; an outage delays both, stops neither
                    if time.monotonic() - renewed >= RENEW_SECONDS:
                        taken = await self._take_lease(tenant, checkpoint_id, None)
                        if taken is None or taken.owner != self.name:
                            return  # finished or taken over meanwhile
                        renewed = time.monotonic()
                    if done := await self._step(identity, checkpoint_id):
                        return
                except _RETRIABLE as exc:
                    log.warning("compaction %s: %s; retrying", checkpoint_id, exc.message)
                await asyncio.sleep(pause)
                pause = min(POLL_SECONDS[1], pause * 1.5)
            log.warning("phase 2 of %s still running; leaving it to the next owner", checkpoint_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # never let an owner die silently; the lease lets another replica resume
            log.exception("compaction %s stopped", checkpoint_id)
        finally:
            if not done:  # a finished checkpoint has no lease (`finalisation`), a removed one none to keep
                await asyncio.shield(self._release_lease(tenant, checkpoint_id))

    async def _step(self, identity: RequestIdentity, checkpoint_id: str) -> bool:
        """One look: commit when needed, finalise when phase 2 ended. True once nothing is left."""
        tenant = identity.tenant
        record = await self._store.read(tenant, checkpoint_id)
        if record is None:
            return True
        if not record.is_terminal and not record.archive_uri:
            committed = await self._commit(identity, record)
            if committed is None or committed.is_terminal:
                return True
            self._memory_changes.changed(tenant)
            record = committed
        self._committed.get(checkpoint_id, asyncio.Event()).set()
        record = await self._summarise(tenant, record)
        done = (await finalise(self._ov, tenant, record, store=self._store)).is_terminal
        if done:
            self._memory_changes.changed(tenant)  # phase 2 may have extracted memories
        return done

    async def _summarise(self, tenant: Tenant, record: CheckpointRecord) -> CheckpointRecord:
        """The checkpoint with its engine summary and the summary of the stream's earlier
        checkpoints (`services.compaction.history`); a refusal is logged and never blocks the
        finalisation (transient errors are retried by the caller's next step)."""
        try:
            summarised = await self._summariser.ensure(tenant, record)
            summarised = await self._history.ensure(stream_identity(tenant, record), summarised)
        except _RETRIABLE:
            raise
        except BackendError as exc:
            log.warning("engine summary of %s not written: %s", record.checkpoint_id, exc.message)
            return record
        if (summarised.engine_summary, summarised.earlier) != (record.engine_summary, record.earlier):
            self._memory_changes.changed(tenant)  # assembly replicas here show it at once
        return summarised

    async def _sweep(self) -> None:
        while not self._closing:
            await asyncio.sleep(SWEEP_SECONDS)
            for key, identity in list(self._known.items()):
                try:
                    state = await self._states.load(identity)
                    if state is None or not state.inflight:
                        self._known.pop(key, None)
                        continue
                    await self.own_all(identity, state)
                except (BackendError, Aborted) as exc:
                    log.warning("sweep of %s: %s", key, exc.message)
                except Exception:
                    log.exception("sweep of %s failed", key)

    async def shutdown(self) -> None:
        """Stop working: commits under way get `shutdown_wait_seconds` to be accepted and
        recorded, then every job stops and releases its lease so another replica resumes at once."""
        self._closing = True
        committing = [asyncio.create_task(event.wait()) for event in self._committed.values()]
        if committing:
            await asyncio.wait(committing, timeout=self._shutdown_wait)
            for waiter in committing:
                waiter.cancel()
        tasks = [*self._jobs.values(), *([self._sweeper] if self._sweeper else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
