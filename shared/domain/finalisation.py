"""The idempotent finalisation of a compaction's commit.

`finalise` turns a PENDING checkpoint whose OpenViking task reached a terminal state into
COMPLETED (summary, memory URIs, provenance, memory tags) or FAILED (reason); it is safe to run
twice or concurrently from any replica (compare-and-swap on every document). A checkpoint whose
commit is not recorded is reconciled with what OpenViking holds: when the session has an
archive, that archive is the commit (never a false FAILED); the commit itself is made by the
compaction worker that owns the hand-off (`services.compaction.worker`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from contextengine.v1 import checkpoint_pb2

from shared.domain.archives import archive_index_of, read_archive_turns, session_archives
from shared.domain.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    EngineSummary,
    ProvenanceSource,
    Status,
    is_placeholder_summary,
    utc_now,
)
from shared.domain.documents import DocumentStore
from shared.domain.envelope import PersistedTurn
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.errors import BackendError, BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.telemetry import attributes as attr
from shared.telemetry.metrics import record_compaction, record_compaction_failure
from shared.telemetry.tracing import finalisation_span

log = logging.getLogger(__name__)


Outcome = tuple[str, str]
"""("completed" | "failed", failure reason)."""
SummaryOf = Callable[[Sequence[PersistedTurn]], EngineSummary]
"""The engine summary of a checkpoint's archived turns (`services.compaction.engine_summary`)."""


async def _task_outcome(
    openviking: OpenVikingClient, tenant: Tenant, task_id: str, deadline: float | None
) -> Outcome | bool | None:
    """The task's outcome, None while it runs, False when the task is unknown (expired)."""
    try:
        task = await openviking.get_task(tenant, task_id, deadline=deadline)
    except BackendNotFound:
        return False
    if not task.is_terminal:
        return None
    if task.status == "completed":
        return "completed", ""
    return "failed", task.error or f"commit task {task.status}"


async def _terminal_outcome(
    openviking: OpenVikingClient, tenant: Tenant, record: CheckpointRecord, deadline: float | None
) -> Outcome | None:
    """The outcome once OpenViking's phase 2 ended, else None (from the task, else the archive)."""
    if record.task_id:
        outcome = await _task_outcome(openviking, tenant, record.task_id, deadline)
        if outcome is None or isinstance(outcome, tuple):
            return outcome
    if not record.archive_uri:
        return None
    if await openviking.read_archive_done(tenant, record.archive_uri, deadline=deadline) is not None:
        return "completed", ""
    failure = await openviking.read_archive_failure(tenant, record.archive_uri, deadline=deadline)
    if failure is not None:
        return "failed", failure.error or f"phase 2 failed at {failure.stage or 'unknown stage'}"
    return None


async def _archive_summary(
    openviking: OpenVikingClient, tenant: Tenant, record: CheckpointRecord, deadline: float | None
) -> str:
    archive_id = record.archive_uri.rstrip("/").rsplit("/", 1)[-1]
    try:
        archive = await openviking.get_session_archive(
            tenant, record.session_id, archive_id, deadline=deadline
        )
    except BackendNotFound:
        return ""
    summary = (archive.overview or archive.abstract).strip()
    return "" if is_placeholder_summary(summary) else summary


async def _record_memories(
    openviking: OpenVikingClient,
    store: CheckpointStore,
    tenant: Tenant,
    record: CheckpointRecord,
    deadline: float | None,
) -> list[str]:
    """Memory URIs the commit added or updated; provenance docs written and memories tagged."""
    diff = await openviking.read_memory_diff(tenant, record.archive_uri, deadline=deadline)
    if diff is None:
        return []
    changed = [(m.uri, m.memory_type, "add") for m in diff.adds]
    changed += [(m.uri, m.memory_type, "update") for m in diff.updates]
    uris: list[str] = []
    for uri, memory_type, operation in changed:
        if uri in uris:
            continue
        uris.append(uri)
        source = ProvenanceSource(
            checkpoint_id=record.checkpoint_id,
            stream_id=record.stream_id,
            session_id=record.session_id,
            archive_uri=record.archive_uri,
            turn_ids=record.turn_ids,
            start_sequence=record.start_sequence,
            end_sequence=record.end_sequence,
            memory_type=memory_type,
            operation=operation,
        )
        await store.add_provenance(tenant, uri, source, deadline=deadline)
        try:
            await openviking.set_tags(
                tenant,
                uri,
                [f"ce_checkpoint={record.checkpoint_id}", f"ce_session={record.session_id}"],
                mode="append",
                deadline=deadline,
            )
        except BackendError as exc:  # tags are a convenience; provenance docs are the record
            log.warning("could not tag memory %s: %s", uri, exc.message)
    return uris


async def forget_inflight(
    states: StreamStateStore, identity: RequestIdentity, checkpoint_id: str, deadline: float | None
) -> None:
    def drop(state: StreamState) -> StreamState | None:
        if not any(entry.checkpoint_id == checkpoint_id for entry in state.inflight):
            return None
        state.inflight = [entry for entry in state.inflight if entry.checkpoint_id != checkpoint_id]
        return state

    await states.update(identity, drop, deadline=deadline)


def stream_identity(tenant: Tenant, record: CheckpointRecord) -> RequestIdentity:
    """The identity of the stream a checkpoint belongs to (host session x agent)."""
    return RequestIdentity(tenant, record.agent_id, record.host_session_id, "")


async def _commit_task_id(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, archive_uri: str, deadline: float | None
) -> str:
    """The commit task that wrote `archive_uri`, when OpenViking still lists it."""
    tasks = await openviking.list_tasks(
        tenant, resource_id=session_id, task_type="session_commit", limit=20, deadline=deadline
    )
    wanted = archive_uri.rstrip("/")
    return next((t.task_id for t in tasks if (t.archive_uri or "").rstrip("/") == wanted), "")


async def attach_commit(
    openviking: OpenVikingClient,
    store: CheckpointStore,
    tenant: Tenant,
    checkpoint_id: str,
    *,
    archive_uri: str,
    task_id: str,
    deadline: float | None = None,
    summary_of: SummaryOf | None = None,
) -> CheckpointRecord | None:
    """Record the commit (archive, task, archived turn range) on a checkpoint that has none;
    with `summary_of`, the engine summary of the archived turns in the same write (the turns
    are read once, the checkpoint written once)."""
    turns = await read_archive_turns(openviking, tenant, archive_uri, deadline=deadline)
    committed_at = utc_now()
    summary = summary_of(turns) if summary_of is not None else None

    def attach(current: CheckpointRecord) -> CheckpointRecord | None:
        if current.archive_uri:
            return None
        current.task_id = task_id
        current.archive_uri = archive_uri
        current.archive_index = archive_index_of(archive_uri)
        current.committed_at = committed_at
        current.turn_ids = [t.turn_id for t in turns]
        if turns:
            current.start_sequence = turns[0].sequence
            current.end_sequence = turns[-1].sequence
        if summary is not None and current.engine_summary is None:
            current.engine_summary = summary
        return current

    return await store.update(tenant, checkpoint_id, attach, deadline=deadline)


async def reconcile_commit(
    openviking: OpenVikingClient,
    store: CheckpointStore,
    tenant: Tenant,
    record: CheckpointRecord,
    deadline: float | None,
    *,
    summary_of: SummaryOf | None = None,
) -> CheckpointRecord:
    """A checkpoint with no recorded commit: when its session has an archive, record that one
    (`attach_commit`)."""
    archives = await session_archives(openviking, tenant, record.session_id, deadline=deadline)
    if not archives:
        return record
    archive_uri = archives[0]
    task_id = await _commit_task_id(openviking, tenant, record.session_id, archive_uri, deadline)
    attached = await attach_commit(
        openviking,
        store,
        tenant,
        record.checkpoint_id,
        archive_uri=archive_uri,
        task_id=task_id,
        deadline=deadline,
        summary_of=summary_of,
    )
    return attached or record


def _finished(current: CheckpointRecord) -> CheckpointRecord:
    """A terminal checkpoint has no owner: the lease goes in the same write as the outcome, so no
    reader ever sees a finished checkpoint still held."""
    current.finished_at = utc_now()
    current.owner = ""
    current.lease_until = None
    return current


def _failing(reason: str) -> Callable[[CheckpointRecord], CheckpointRecord | None]:
    def fail(current: CheckpointRecord) -> CheckpointRecord | None:
        if current.is_terminal:
            return None
        current.status = Status.CHECKPOINT_STATUS_FAILED
        current.failure_reason = reason
        return _finished(current)

    return fail


async def _settle(
    openviking: OpenVikingClient,
    store: CheckpointStore,
    tenant: Tenant,
    record: CheckpointRecord,
    *,
    status: str,
    reason: str,
    deadline: float | None,
) -> CheckpointRecord:
    """Write the terminal outcome, in a span linked to the turn that started the compaction."""
    with finalisation_span(record.origin_traceparent, checkpoint_id=record.checkpoint_id) as span:
        if status == "completed":
            summary = await _archive_summary(openviking, tenant, record, deadline)
            memory_uris = await _record_memories(openviking, store, tenant, record, deadline)

            def complete(current: CheckpointRecord) -> CheckpointRecord | None:
                if current.is_terminal:
                    return None
                current.status = Status.CHECKPOINT_STATUS_COMPLETED
                current.summary_uri = current.archive_uri
                current.summary = summary
                current.extracted_memory_uris = memory_uris
                return _finished(current)

            updated = await store.update(tenant, record.checkpoint_id, complete, deadline=deadline)
        else:
            updated = await store.update(tenant, record.checkpoint_id, _failing(reason), deadline=deadline)
        settled = updated or record
        outcome = "completed" if status == "completed" else "failed"
        attr.set_checkpoint(record.checkpoint_id, outcome=outcome, span=span)
        if updated is not None and settled.finished_at is not None:
            trigger = checkpoint_pb2.CompactionTrigger.Name(settled.trigger)  # type: ignore[arg-type]
            seconds = (settled.finished_at - settled.created_at).total_seconds()
            record_compaction(seconds, trigger=trigger, outcome=outcome)
            if outcome == "failed":
                record_compaction_failure("phase2_failed", trigger=trigger)
        return settled


async def finalise(
    openviking: OpenVikingClient,
    tenant: Tenant,
    record: CheckpointRecord,
    *,
    store: CheckpointStore | None = None,
    deadline: float | None = None,
) -> CheckpointRecord:
    """Finish a checkpoint whose OpenViking task is terminal; idempotent and race-safe.

    `record` is the checkpoint as the caller just read it (a poll reads it once, not twice):
    every change made here is a compare-and-swap on the stored document, so an older copy only
    costs a retry. Returns the checkpoint as stored afterwards (still PENDING while phase 2 runs).
    A terminal checkpoint is removed from its stream's inflight list. `store`: the caller's
    checkpoint store, which remembers the version it just read (an update then needs no read).
    """
    documents = DocumentStore(openviking)
    store = store or CheckpointStore(documents)
    states = StreamStateStore(documents)
    if not record.is_terminal and not record.archive_uri:
        record = await reconcile_commit(openviking, store, tenant, record, deadline)
        if not record.archive_uri:
            return record  # not committed yet: the worker owning the hand-off commits it
    if not record.is_terminal:
        outcome = await _terminal_outcome(openviking, tenant, record, deadline)
        if outcome is None:
            return record
        status, reason = outcome
        record = await _settle(
            openviking, store, tenant, record, status=status, reason=reason, deadline=deadline
        )
    await forget_inflight(states, stream_identity(tenant, record), record.checkpoint_id, deadline)
    return record


async def mark_failed(
    openviking: OpenVikingClient,
    tenant: Tenant,
    checkpoint_id: str,
    reason: str,
    *,
    deadline: float | None = None,
) -> CheckpointRecord | None:
    """Record a failure that happened before OpenViking took the commit; drops it from inflight."""
    documents = DocumentStore(openviking)
    record = await CheckpointStore(documents).update(
        tenant, checkpoint_id, _failing(reason), deadline=deadline
    )
    if record is not None:
        await forget_inflight(
            StreamStateStore(documents), stream_identity(tenant, record), checkpoint_id, deadline
        )
    return record
