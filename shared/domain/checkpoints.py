"""Compaction checkpoints (docs/design.md §5.3) and the provenance of extracted memories.

One JSON document per checkpoint at
`viking://~/resources/.contextengine/streams/<stream_id>/checkpoints/<checkpoint_id>.json`, created
once (`shared.domain.document_slots`: the folder `<checkpoint_id>.claim` beside it decides who
creates it, and a creation left unfinished is taken over in `<checkpoint_id>.1.json`); the
stream state's `checkpoint_ids` is the index. A checkpoint id embeds its stream id, so it can be
found from the id alone. For every memory a commit extracted, a provenance document at
`viking://~/resources/.contextengine/provenance/<sha256(memory uri)[:32]>.json` links the memory
back to the checkpoint, the OpenViking session and archive, and the archived turns.

How a checkpoint reaches its outcome is `shared.domain.finalisation`; what OpenViking archived is
`shared.domain.archives`.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime

from contextengine.v1 import checkpoint_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, Field

from shared.domain.document_slots import DocumentSlots, SlotRead, checkpoint_layout
from shared.domain.documents import ENGINE_ROOT, DocumentStore, StoredDocument, after_conflict
from shared.errors import Aborted
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache

log = logging.getLogger(__name__)

CHECKPOINT_ID_PREFIX = "cp-"
_CHECKPOINT_ID = re.compile(r"^cp-([0-9a-f]{20})-(\d{13})-([0-9a-f]{6})$")
PROVENANCE_DIR = f"{ENGINE_ROOT}/provenance"
MAX_CAS_ATTEMPTS = 12
REMEMBERED_CHECKPOINTS = 4_096
"""Checkpoints a process remembers as it last read or wrote them (a few hundred bytes each)."""
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


def provenance_uri(memory_uri: str) -> str:
    return f"{PROVENANCE_DIR}/{hashlib.sha256(memory_uri.encode()).hexdigest()[:32]}.json"


class SummarySentence(BaseModel):
    """One sentence an engine summary shows, as said (see `services.compaction.extractive`)."""

    position: list[int]
    exchange: list[int]
    said_on: str = ""
    role: str = "U"
    text: str


class EngineSummary(BaseModel):
    """The engine's own LLM-free summary of a checkpoint's archived turns, and what it keeps of
    them: per kind (names, numbers, dates), the source's terms and how many the text still says."""

    text: str
    tokens: int
    encoding: str
    sentences: list[SummarySentence] = Field(default_factory=list)
    source_terms: dict[str, list[str]] = Field(default_factory=dict)
    kept_terms: dict[str, int] = Field(default_factory=dict)
    covers_turns: int = 0
    """Archived turns it summarises (the checkpoint's `start_sequence`..`end_sequence`)."""
    covers_checkpoints: int = 1
    """Checkpoints whose turns it summarises (more than one for a summary of summaries)."""

    def terms(self) -> dict[str, frozenset[str]]:
        return {kind: frozenset(terms) for kind, terms in self.source_terms.items()}


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
    engine_summary: EngineSummary | None = None
    """Written as soon as the commit is recorded, LLM or not; shown while `summary` is empty."""
    earlier: EngineSummary | None = None
    """A summary of every earlier checkpoint of the stream (of their summaries, within the same
    cap), so a long session's whole past fits a budget; `memory_expand("<id>/earlier")` returns
    their raw turns."""
    extracted_memory_uris: list[str] = Field(default_factory=list)
    failure_reason: str = ""
    origin_traceparent: str = ""
    owner: str = ""
    """The compaction replica working on it while `lease_until` is in the future."""
    lease_until: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in (Status.CHECKPOINT_STATUS_COMPLETED, Status.CHECKPOINT_STATUS_FAILED)

    @property
    def shown_summary(self) -> str:
        """What stands in for the archived turns: OpenViking's summary (an LLM's) when it wrote
        one, else the engine's own."""
        if self.summary:
            return self.summary
        return self.engine_summary.text if self.engine_summary else ""


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
    """Checkpoint and provenance documents, updated with compare-and-swap. A checkpoint is
    created once (`document_slots`): no later reader that finds none can overwrite it.

    Each checkpoint is remembered as this process last read or wrote it: an update starts from
    that version, so changing a checkpoint this process just read or wrote costs one write, not a
    read and a write (a compaction's owner changes its checkpoint four to five times: lease,
    commit, summary, outcome, release). Compare-and-swap refuses a stale version and the update
    reads again; a decision not to write is only ever taken on a fresh read."""

    def __init__(self, documents: DocumentStore, remembered: int = REMEMBERED_CHECKPOINTS) -> None:
        self._documents = documents
        self._slots = DocumentSlots(documents)
        self._known: SizedCache[tuple[Tenant, str], tuple[str, StoredDocument]] = SizedCache(remembered)

    async def _read(self, tenant: Tenant, checkpoint_id: str, deadline: float | None) -> tuple[str, SlotRead]:
        """The checkpoint's slot URI and what it holds ("": not a checkpoint id)."""
        stream_id = stream_of_checkpoint(checkpoint_id)
        if stream_id is None:
            return "", SlotRead(0, None)
        layout = checkpoint_layout(stream_id, checkpoint_id)
        read = await self._slots.read(tenant, layout, deadline=deadline)
        return layout.slot_uri(read.slot), read

    def _remember(self, tenant: Tenant, checkpoint_id: str, uri: str, stored: StoredDocument | None) -> None:
        if stored is None:
            self._known.pop((tenant, checkpoint_id))
        else:
            self._known.put((tenant, checkpoint_id), (uri, stored))

    async def read(
        self, tenant: Tenant, checkpoint_id: str, *, deadline: float | None = None
    ) -> CheckpointRecord | None:
        """The checkpoint as stored now (never from this process's memory)."""
        uri, read = await self._read(tenant, checkpoint_id, deadline)
        self._remember(tenant, checkpoint_id, uri, read.stored)
        return CheckpointRecord.model_validate(read.stored.data) if read.stored else None

    async def create(
        self, tenant: Tenant, record: CheckpointRecord, *, deadline: float | None = None
    ) -> CheckpointRecord | None:
        """The checkpoint as stored, `record` when none was and this call created it (one read
        either way); None while another caller is still creating it."""
        layout = checkpoint_layout(record.stream_id, record.checkpoint_id)
        read = await self._slots.read(tenant, layout, deadline=deadline)
        if read.stored is not None:
            self._remember(tenant, record.checkpoint_id, layout.slot_uri(read.slot), read.stored)
            return CheckpointRecord.model_validate(read.stored.data)
        slot = await self._slots.claim(tenant, layout, read.slot, deadline=deadline)
        if slot is None:
            return await self.read(tenant, record.checkpoint_id, deadline=deadline)
        data = record.model_dump(mode="json")
        stored = await self._slots.create(tenant, layout, slot, data, deadline=deadline)
        self._remember(tenant, record.checkpoint_id, layout.slot_uri(slot), stored)
        return record

    async def remove(self, tenant: Tenant, checkpoint_id: str, *, deadline: float | None = None) -> None:
        """Delete the checkpoint's document (its creation claim stays: it is never created again)."""
        uri, read = await self._read(tenant, checkpoint_id, deadline)
        self._remember(tenant, checkpoint_id, uri, None)
        if read.stored is not None:
            await self._documents.remove(tenant, uri, deadline=deadline)

    async def update(
        self,
        tenant: Tenant,
        checkpoint_id: str,
        mutate: Callable[[CheckpointRecord], CheckpointRecord | None],
        *,
        deadline: float | None = None,
    ) -> CheckpointRecord | None:
        """Apply `mutate` atomically (None leaves it unchanged); None when the checkpoint is unknown."""
        for attempt in range(MAX_CAS_ATTEMPTS):
            known = self._known.pop((tenant, checkpoint_id))  # taken: put back only as stored
            fresh = known is None
            if known is None:
                uri, read = await self._read(tenant, checkpoint_id, deadline)
                if read.stored is None:
                    return None
                known = (uri, read.stored)
            uri, stored = known
            current = CheckpointRecord.model_validate(stored.data)
            changed = mutate(current.model_copy(deep=True))
            if changed is None:
                if not fresh:
                    continue  # remembered, perhaps stale: a decision not to write needs a fresh read
                self._remember(tenant, checkpoint_id, uri, stored)
                return current
            data = changed.model_dump(mode="json")
            try:
                sha = await self._documents.write(
                    tenant, uri, data, expected_sha256=stored.sha256, deadline=deadline
                )
            except Aborted:
                await after_conflict(attempt, remembered=not fresh)
                continue
            self._remember(tenant, checkpoint_id, uri, StoredDocument(data, sha))
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
                await after_conflict(attempt, remembered=False)
                continue
            return
        raise Aborted(f"provenance of {memory_uri} is contended; retry the call")
