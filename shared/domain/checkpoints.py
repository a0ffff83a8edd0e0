"""Compaction checkpoints (design §5.3), provenance and the idempotent finalisation of a commit.

One JSON document per checkpoint at
`viking://~/resources/.contextengine/streams/<stream_id>/checkpoints/<checkpoint_id>.json`; the
stream state's `checkpoint_ids` is the index. A checkpoint id embeds its stream id, so it can be
found from the id alone. For every memory a commit extracted, a provenance document at
`viking://~/resources/.contextengine/provenance/<sha256(memory uri)[:32]>.json` links the memory
back to the checkpoint, the OpenViking session and archive, and the archived turns.

`finalise` turns a PENDING checkpoint whose OpenViking task reached a terminal state into
COMPLETED (summary, memory URIs, provenance, memory tags) or FAILED (reason); it is safe to run
twice or concurrently from any replica (compare-and-swap on every document). A checkpoint whose
commit is not recorded is reconciled with what OpenViking holds: when the session has an
archive, that archive is the commit (never a false FAILED); the commit itself is made by the
compaction worker that owns the hand-off (`services.compaction.worker`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from contextengine.v1 import checkpoint_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, Field, ValidationError

from shared.domain.documents import ENGINE_ROOT, DocumentStore
from shared.domain.envelope import PersistedTurn, persisted_turn
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore, stream_dir
from shared.errors import Aborted, BackendError, BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.sessions import SessionMessage
from shared.openviking.tenant import Tenant
from shared.telemetry import attributes as attr
from shared.telemetry.metrics import record_compaction, record_compaction_failure
from shared.telemetry.tracing import finalisation_span

log = logging.getLogger(__name__)

CHECKPOINT_ID_PREFIX = "cp-"
_CHECKPOINT_ID = re.compile(r"^cp-([0-9a-f]{20})-(\d{13})-([0-9a-f]{6})$")
_ARCHIVE_ID = re.compile(r"archive_(\d+)$")
PROVENANCE_DIR = f"{ENGINE_ROOT}/provenance"
MAX_CAS_ATTEMPTS = 12
# OpenViking's no-LLM working-memory fallback ("# Session Summary / **Overview**: N turns, M messages").
_FALLBACK_SUMMARY = re.compile(
    r"^\s*(?:#\s*Session Summary\s*)?\**Overview\**:\s*\d+ turns?, \d+ messages?\s*$", re.IGNORECASE
)


def is_placeholder_summary(text: str) -> bool:
    """True for a summary that carries no content (OpenViking's count-only no-LLM fallback)."""
    return not text.strip() or _FALLBACK_SUMMARY.match(text) is not None


Status = checkpoint_pb2.CheckpointStatus


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_checkpoint_id(stream_id: str) -> str:
    """`cp-<stream id>-<epoch ms>-<random>`: sortable within a stream, locatable from the id."""
    return f"{CHECKPOINT_ID_PREFIX}{stream_id}-{int(time.time() * 1000):013d}-{secrets.token_hex(3)}"


def stream_of_checkpoint(checkpoint_id: str) -> str | None:
    match = _CHECKPOINT_ID.match(checkpoint_id)
    return match[1] if match else None


def is_checkpoint_id(value: str) -> bool:
    return _CHECKPOINT_ID.match(value) is not None


def checkpoint_uri(stream_id: str, checkpoint_id: str) -> str:
    return f"{stream_dir(stream_id)}/checkpoints/{checkpoint_id}.json"


def provenance_uri(memory_uri: str) -> str:
    return f"{PROVENANCE_DIR}/{hashlib.sha256(memory_uri.encode()).hexdigest()[:32]}.json"


def archive_index_of(archive_uri: str) -> int:
    """1-based archive number (`.../archive_003` -> 3); 0 when unknown."""
    match = _ARCHIVE_ID.search(archive_uri.rstrip("/"))
    return int(match[1]) if match else 0


def session_uri(tenant: Tenant, session_id: str) -> str:
    return f"viking://user/{tenant.user_id}/sessions/{session_id}"


def archive_messages_uri(archive_uri: str) -> str:
    return f"{archive_uri.rstrip('/')}/messages.jsonl"


class CheckpointRecord(BaseModel):
    """The stored checkpoint: the proto's fields plus what finalisation and expansion need."""

    checkpoint_id: str
    stream_id: str
    session_id: str
    host_session_id: str = ""
    agent_id: str = ""
    status: int = Status.CHECKPOINT_STATUS_PENDING
    trigger: int = 0
    created_at: datetime = Field(default_factory=utc_now)
    committed_at: datetime | None = None
    finished_at: datetime | None = None
    archive_uri: str = ""
    archive_index: int = 0
    task_id: str = ""
    start_sequence: int = -1
    end_sequence: int = -1
    turn_ids: list[str] = Field(default_factory=list)
    summary_uri: str = ""
    summary: str = ""
    """The archive's working-memory overview (empty without an LLM summary)."""
    extracted_memory_uris: list[str] = Field(default_factory=list)
    failure_reason: str = ""
    origin_traceparent: str = ""
    owner: str = ""
    """The compaction replica working on it while `lease_until` is in the future."""
    lease_until: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in (Status.CHECKPOINT_STATUS_COMPLETED, Status.CHECKPOINT_STATUS_FAILED)


class ProvenanceSource(BaseModel):
    checkpoint_id: str
    stream_id: str
    session_id: str
    archive_uri: str
    turn_ids: list[str] = Field(default_factory=list)
    start_sequence: int = -1
    end_sequence: int = -1
    memory_type: str = ""
    operation: str = "add"


class ProvenanceRecord(BaseModel):
    """Memory URI -> the compactions (newest last) whose archived turns produced or updated it."""

    memory_uri: str
    sources: list[ProvenanceSource] = Field(default_factory=list)


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value.astimezone(UTC))
    return stamp


def to_proto(record: CheckpointRecord) -> checkpoint_pb2.CompactCheckpoint:
    message = checkpoint_pb2.CompactCheckpoint(
        checkpoint_id=record.checkpoint_id,
        session_id=record.session_id,
        archive_index=record.archive_index,
        summary_uri=record.summary_uri,
        extracted_memory_uris=record.extracted_memory_uris,
        status=record.status,  # type: ignore[arg-type]
        failure_reason=record.failure_reason,
        archive_uri=record.archive_uri,
        task_id=record.task_id,
        trigger=record.trigger,  # type: ignore[arg-type]
        host_session_id=record.host_session_id,
        agent_id=record.agent_id,
        origin_traceparent=record.origin_traceparent,
    )
    if record.start_sequence >= 0:
        message.source_turn_range.start_sequence = record.start_sequence
        message.source_turn_range.end_sequence = record.end_sequence
    committed = _timestamp(record.committed_at)
    if committed is not None:
        message.committed_at.CopyFrom(committed)
    finished = _timestamp(record.finished_at)
    if finished is not None:
        message.finished_at.CopyFrom(finished)
    return message


def from_proto(message: checkpoint_pb2.CompactCheckpoint, stream_id: str) -> CheckpointRecord:
    has_range = message.HasField("source_turn_range")
    return CheckpointRecord(
        checkpoint_id=message.checkpoint_id,
        stream_id=stream_id,
        session_id=message.session_id,
        host_session_id=message.host_session_id,
        agent_id=message.agent_id,
        status=message.status,
        trigger=message.trigger,
        committed_at=message.committed_at.ToDatetime(tzinfo=UTC)
        if message.HasField("committed_at")
        else None,
        finished_at=message.finished_at.ToDatetime(tzinfo=UTC) if message.HasField("finished_at") else None,
        archive_uri=message.archive_uri,
        archive_index=message.archive_index,
        task_id=message.task_id,
        start_sequence=message.source_turn_range.start_sequence if has_range else -1,
        end_sequence=message.source_turn_range.end_sequence if has_range else -1,
        summary_uri=message.summary_uri,
        extracted_memory_uris=list(message.extracted_memory_uris),
        failure_reason=message.failure_reason,
        origin_traceparent=message.origin_traceparent,
    )


class CheckpointStore:
    """Checkpoint and provenance documents, updated with compare-and-swap."""

    def __init__(self, documents: DocumentStore) -> None:
        self._documents = documents

    async def read(
        self, tenant: Tenant, checkpoint_id: str, *, deadline: float | None = None
    ) -> CheckpointRecord | None:
        stream_id = stream_of_checkpoint(checkpoint_id)
        if stream_id is None:
            return None
        stored = await self._documents.read(
            tenant, checkpoint_uri(stream_id, checkpoint_id), deadline=deadline
        )
        return CheckpointRecord.model_validate(stored.data) if stored else None

    async def create(
        self, tenant: Tenant, record: CheckpointRecord, *, deadline: float | None = None
    ) -> None:
        await self._documents.write(
            tenant,
            checkpoint_uri(record.stream_id, record.checkpoint_id),
            record.model_dump(mode="json"),
            deadline=deadline,
        )

    async def update(
        self,
        tenant: Tenant,
        checkpoint_id: str,
        mutate: Callable[[CheckpointRecord], CheckpointRecord | None],
        *,
        deadline: float | None = None,
    ) -> CheckpointRecord | None:
        """Apply `mutate` atomically (None leaves it unchanged); None when the checkpoint is unknown."""
        stream_id = stream_of_checkpoint(checkpoint_id)
        if stream_id is None:
            return None
        uri = checkpoint_uri(stream_id, checkpoint_id)
        for attempt in range(MAX_CAS_ATTEMPTS):
            stored = await self._documents.read(tenant, uri, deadline=deadline)
            if stored is None:
                return None
            current = CheckpointRecord.model_validate(stored.data)
            changed = mutate(current.model_copy(deep=True))
            if changed is None:
                return current
            try:
                await self._documents.write(
                    tenant,
                    uri,
                    changed.model_dump(mode="json"),
                    expected_sha256=stored.sha256,
                    deadline=deadline,
                )
            except Aborted:
                await asyncio.sleep(0.01 * (attempt + 1))
                continue
            return changed
        raise Aborted(f"checkpoint {checkpoint_id} is contended; retry the call")

    async def read_provenance(
        self, tenant: Tenant, memory_uri: str, *, deadline: float | None = None
    ) -> ProvenanceRecord | None:
        stored = await self._documents.read(tenant, provenance_uri(memory_uri), deadline=deadline)
        return ProvenanceRecord.model_validate(stored.data) if stored else None

    async def add_provenance(
        self, tenant: Tenant, memory_uri: str, source: ProvenanceSource, *, deadline: float | None = None
    ) -> None:
        uri = provenance_uri(memory_uri)
        for attempt in range(MAX_CAS_ATTEMPTS):
            stored = await self._documents.read(tenant, uri, deadline=deadline)
            record = (
                ProvenanceRecord.model_validate(stored.data)
                if stored
                else ProvenanceRecord(memory_uri=memory_uri)
            )
            if any(s.checkpoint_id == source.checkpoint_id for s in record.sources):
                return
            record.sources.append(source)
            try:
                await self._documents.write(
                    tenant,
                    uri,
                    record.model_dump(mode="json"),
                    expected_sha256=stored.sha256 if stored else None,
                    deadline=deadline,
                )
            except Aborted:
                await asyncio.sleep(0.01 * (attempt + 1))
                continue
            return
        raise Aborted(f"provenance of {memory_uri} is contended; retry the call")


# --- reading archived turns ---------------------------------------------------------------------


def parse_session_messages(text: str) -> list[SessionMessage]:
    """A `messages.jsonl` file: one stored message per line (unparseable lines are skipped)."""
    messages: list[SessionMessage] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            messages.append(SessionMessage.model_validate_json(line))
        except ValidationError:
            log.warning("skipping an unparseable session message line")
    return messages


def engine_turns(messages: Sequence[SessionMessage]) -> list[PersistedTurn]:
    """The host messages the engine wrote, by sequence, de-duplicated by turn id."""
    turns: dict[str, PersistedTurn] = {}
    for message in messages:
        turn = persisted_turn(message)
        if turn is not None:
            turns.setdefault(turn.turn_id, turn)
    return sorted(turns.values(), key=lambda t: t.sequence)


async def read_archive_turns(
    openviking: OpenVikingClient, tenant: Tenant, archive_uri: str, *, deadline: float | None = None
) -> list[PersistedTurn]:
    """The archived host messages (readable for pending, completed and failed archives)."""
    try:
        text = await openviking.read(tenant, archive_messages_uri(archive_uri), raw=True, deadline=deadline)
    except BackendNotFound:
        return []
    return engine_turns(parse_session_messages(text))


# --- finalisation --------------------------------------------------------------------------------


Outcome = tuple[str, str]
"""("completed" | "failed", failure reason)."""


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


async def session_archives(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, *, deadline: float | None = None
) -> list[str]:
    """URIs of the session's archives, oldest first (none when the session was never committed)."""
    try:
        listing = await openviking.ls(tenant, f"{session_uri(tenant, session_id)}/history", deadline=deadline)
    except BackendNotFound:
        return []
    return sorted(
        entry.uri.rstrip("/")
        for entry in listing.entries
        if entry.is_dir and _ARCHIVE_ID.search(entry.uri.rstrip("/"))
    )


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
) -> CheckpointRecord | None:
    """Record the commit (archive, task, archived turn range) on a checkpoint that has none."""
    turns = await read_archive_turns(openviking, tenant, archive_uri, deadline=deadline)
    committed_at = utc_now()

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
        return current

    return await store.update(tenant, checkpoint_id, attach, deadline=deadline)


async def reconcile_commit(
    openviking: OpenVikingClient,
    store: CheckpointStore,
    tenant: Tenant,
    record: CheckpointRecord,
    deadline: float | None,
) -> CheckpointRecord:
    """A checkpoint with no recorded commit: when its session has an archive, record that one."""
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
    checkpoint_id: str,
    *,
    deadline: float | None = None,
) -> CheckpointRecord | None:
    """Finish a checkpoint whose OpenViking task is terminal; idempotent and race-safe.

    Returns the checkpoint as stored afterwards (still PENDING while phase 2 runs), or None when
    the checkpoint is unknown. A terminal checkpoint is removed from its stream's inflight list.
    """
    documents = DocumentStore(openviking)
    store = CheckpointStore(documents)
    states = StreamStateStore(documents)
    record = await store.read(tenant, checkpoint_id, deadline=deadline)
    if record is None:
        return None
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
    await forget_inflight(states, stream_identity(tenant, record), checkpoint_id, deadline)
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
