"""Engine session state for one conversation stream (host session x agent), docs/design.md §3.2.

The "session array" lives in OpenViking as one JSON document per stream, updated with
compare-and-swap so that any capture or compaction replica can serve any request:

- `active_session`: the OpenViking session receiving new turns; a compaction moves new turns
  to a fresh session (`generation` + 1) while the old one is committed;
- `last_sequence`: the highest host message position persisted (or claimed: `pending_write`),
  which makes AfterTurn idempotent and self-healing;
- the counters the compaction triggers need, and the compactions still in flight;
- the advancement keys of the newest committed fenced turns (CommitTurn): a key is recorded in
  the same compare-and-swap that releases the turn's write, so "stored" and "key known" change
  together, exactly once.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from shared.domain.document_slots import DocumentSlots, SlotRead, stream_state_layout
from shared.domain.documents import DocumentStore, StoredDocument, after_conflict
from shared.domain.identity import RequestIdentity
from shared.errors import Aborted
from shared.openviking.models.parts import NewMessage
from shared.openviking.tenant import Tenant

MAX_CAS_ATTEMPTS = 12
CREATION_WAIT_SECONDS = 10.0
"""Longest a caller waits for another replica to create a stream's state (within its deadline)."""
COMMITTED_TURNS_KEPT = 64
"""Newest committed turn keys remembered per stream (a host retries a turn before the next one)."""
LAST_SEEN_CAPACITY = 10_000
"""Streams whose last-seen state version this replica keeps (a cache; OpenViking is the truth)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class OutboxMessage(BaseModel):
    """One message of a claim's outbox: its host position and its OpenViking body."""

    sequence: int
    body: NewMessage


class Outbox(BaseModel):
    """A claim's messages, stored with the claim: whoever finishes the claim (its owner, or the
    repair of a claim its owner left) appends those not yet in the session, then releases the
    claim adding `turns` and `tokens` (what the owner's release would have added)."""

    messages: list[OutboxMessage]
    turns: int
    tokens: int


class PendingWrite(BaseModel):
    """A claimed range of host positions whose messages are being appended."""

    start_sequence: int
    end_sequence: int
    session_id: str
    claimed_at: datetime
    turn_key: str = ""
    """`turn_key_digest` of the fenced turn being written (CommitTurn); empty otherwise."""
    expected: int = -1
    """How many messages the claim appends (-1: not known up front): once all of them are in the
    session, the claim is done even if its owner never released it."""
    outbox: Outbox | None = None
    """The claim's messages when they were stored with it (`services.capture.outbox`): its caller
    was answered once the claim was stored, and the claim is completed, never rolled back."""


class UnindexedRange(BaseModel):
    """Positions of one session a claim took whose turn-index documents may not be written yet
    (`services.capture.index_ledger`)."""

    session_id: str
    start: int
    end: int
    since: datetime
    """When the range was claimed, or last taken over by a replica indexing it again."""


class CommittedTurn(BaseModel):
    """A fenced turn's key digest and the stream positions of its stored messages."""

    key: str
    first_sequence: int
    last_sequence: int


class InflightCompaction(BaseModel):
    """A compaction handed off to CompactionService: recorded here, in the same compare-and-swap
    that moved new turns to a fresh session, before the call that started it returns."""

    checkpoint_id: str
    session_id: str
    """The OpenViking session to commit (no longer written to)."""
    task_id: str = ""
    started_at: datetime
    trigger: int = 0
    tokens_before: int = 0
    origin_traceparent: str = ""


class StreamState(BaseModel):
    host_session_id: str
    agent_id: str
    stream_id: str
    generation: int = 0
    active_session: str
    sessions: list[str] = Field(default_factory=list)
    """Every OpenViking session of the stream, oldest first."""
    last_sequence: int = -1
    pending_write: PendingWrite | None = None
    unsettled: list[PendingWrite] = Field(default_factory=list)
    """Ranges a repair rolled back although an append of them may still land (its answer was
    lost): the next write of those positions first looks for their turn ids in that session."""
    turns_since_compaction: int = 0
    tokens_since_compaction: int = 0
    active_tokens: int = 0
    """Estimated tokens of the uncompacted turns (the working context the budget trigger watches)."""
    last_compaction_at: datetime | None = None
    created_at: datetime = Field(default_factory=utc_now)
    inflight: list[InflightCompaction] = Field(default_factory=list)
    checkpoint_ids: list[str] = Field(default_factory=list)
    """Checkpoints of this stream, oldest first."""
    committed_turns: list[CommittedTurn] = Field(default_factory=list)
    """The newest `COMMITTED_TURNS_KEPT` fenced turns, oldest first."""
    unindexed: list[UnindexedRange] = Field(default_factory=list)
    """Claimed ranges not yet confirmed in the turn index: added by the claim's compare-and-swap,
    removed by a later one of the replica that indexed them, indexed again by another replica when
    they stay unconfirmed too long (their indexer died holding them)."""
    partial_turn: CommittedTurn | None = None
    """A fenced turn longer than one append whose claim was repaired with only its first messages
    stored: the positions stored so far. Its retry stores the rest, after them."""

    def committed_turn(self, key: str) -> CommittedTurn | None:
        return next((t for t in self.committed_turns if t.key == key), None)

    def record_turn_progress(self, claim: PendingWrite, last_sequence: int, *, whole: bool) -> None:
        """Record how far the claim's fenced turn (if it is one) is stored: through `last_sequence`,
        whole (committed) or, for a turn of several appends cut short, partly (`partial_turn`)."""
        if not claim.turn_key:
            return
        earlier = self.partial_turn if self.partial_turn and self.partial_turn.key == claim.turn_key else None
        first = earlier.first_sequence if earlier else claim.start_sequence
        if not whole:
            if earlier or last_sequence >= claim.start_sequence:
                self.partial_turn = CommittedTurn(
                    key=claim.turn_key, first_sequence=first, last_sequence=last_sequence
                )
            return
        if earlier:
            self.partial_turn = None
        if self.committed_turn(claim.turn_key) is None:
            turn = CommittedTurn(key=claim.turn_key, first_sequence=first, last_sequence=last_sequence)
            self.committed_turns = [*self.committed_turns, turn][-COMMITTED_TURNS_KEPT:]


def turn_key_digest(advancement_key: str) -> str:
    """What the state keeps of a host's advancement key (bounded size, any characters)."""
    return hashlib.sha256(advancement_key.encode()).hexdigest()[:32]


def session_id_for(stream_id: str, generation: int) -> str:
    return f"ce-{stream_id}-g{generation:04d}"


def stream_of_session(session_id: str) -> str | None:
    """The stream whose OpenViking session `session_id` is (`session_id_for`); None for an id the
    engine did not make."""
    if not session_id.startswith("ce-"):
        return None
    stream_id, marker, generation = session_id[3:].rpartition("-g")
    return stream_id if marker and generation.isdigit() else None


def initial_state(identity: RequestIdentity) -> StreamState:
    first = session_id_for(identity.stream_id, 0)
    return StreamState(
        host_session_id=identity.session_id,
        agent_id=identity.agent_id,
        stream_id=identity.stream_id,
        active_session=first,
        sessions=[first],
    )


class StreamStateStore:
    """Loads and updates stream state with optimistic concurrency (in its slot: `document_slots`)."""

    def __init__(self, documents: DocumentStore) -> None:
        self._slots = DocumentSlots(documents)
        self._documents = documents
        self._last_seen: OrderedDict[tuple[str, str, str], tuple[int, StoredDocument]] = OrderedDict()

    def _key(self, identity: RequestIdentity) -> tuple[str, str, str]:
        return (identity.tenant.account_id, identity.tenant.user_id, identity.stream_id)

    def _remember(self, identity: RequestIdentity, slot: int, stored: StoredDocument) -> None:
        key = self._key(identity)
        self._last_seen[key] = (slot, stored)
        self._last_seen.move_to_end(key)
        while len(self._last_seen) > LAST_SEEN_CAPACITY:
            self._last_seen.popitem(last=False)

    async def _read(self, identity: RequestIdentity, deadline: float | None) -> SlotRead:
        read = await self._slots.read(
            identity.tenant, stream_state_layout(identity.stream_id), deadline=deadline
        )
        if read.stored is not None:
            self._remember(identity, read.slot, read.stored)
        return read

    async def load(self, identity: RequestIdentity, *, deadline: float | None = None) -> StreamState | None:
        """The current state, read from OpenViking (never from this replica's memory)."""
        stored = (await self._read(identity, deadline)).stored
        return StreamState.model_validate(stored.data) if stored else None

    async def load_stream(
        self, tenant: Tenant, stream_id: str, *, deadline: float | None = None
    ) -> StreamState | None:
        """The current state of a stream known by its id alone (a listing, a checkpoint id)."""
        stored = (await self._slots.read(tenant, stream_state_layout(stream_id), deadline=deadline)).stored
        return StreamState.model_validate(stored.data) if stored else None

    async def _load_or_create(
        self, identity: RequestIdentity, deadline: float | None
    ) -> tuple[int, StoredDocument]:
        """The stored state and its slot; the replica that claims a slot creates it, the others
        wait for it as long as the call may (a creation's write can take seconds on a busy
        OpenViking), and take over a creation left unfinished (`document_slots`)."""
        give_up = time.monotonic() + CREATION_WAIT_SECONDS
        if deadline is not None:
            give_up = min(give_up, deadline)
        while True:
            read = await self._read(identity, deadline)
            if read.stored is not None:
                return read.slot, read.stored
            tenant, layout = identity.tenant, stream_state_layout(identity.stream_id)
            slot = await self._slots.claim(tenant, layout, read.slot, deadline=deadline)
            if slot is not None:
                data = initial_state(identity).model_dump(mode="json")
                stored = await self._slots.create(tenant, layout, slot, data, deadline=deadline)
                self._remember(identity, slot, stored)
                return slot, stored
            if time.monotonic() >= give_up:
                raise Aborted(f"stream state of {identity.stream_id} was not created in time")
            await asyncio.sleep(0.05)  # another replica is creating it

    async def update(
        self,
        identity: RequestIdentity,
        mutate: Callable[[StreamState], StreamState | None],
        *,
        deadline: float | None = None,
    ) -> tuple[StreamState, bool]:
        """Apply `mutate` to the current state and store it atomically (retrying on races).

        `mutate` gets a copy and returns the new state, or None to leave it unchanged.
        Returns the resulting state and whether it was written.

        The first attempt starts from the version this replica last read or wrote, saving a
        read on the hot path; compare-and-swap rejects it if another writer came in between
        (then the state is read again at once), and a decision not to write is only ever taken
        on a fresh read. Conflicts on fresh reads back off before the next attempt.
        """
        for attempt in range(MAX_CAS_ATTEMPTS):
            seen = self._last_seen.pop(self._key(identity), None)
            fresh = seen is None
            slot, stored = seen if seen is not None else await self._load_or_create(identity, deadline)
            current = StreamState.model_validate(stored.data)
            changed = mutate(current.model_copy(deep=True))
            if changed is None:
                if not fresh:
                    continue
                self._remember(identity, slot, stored)
                return current, False
            data = changed.model_dump(mode="json")
            uri = stream_state_layout(identity.stream_id).slot_uri(slot)
            try:
                sha = await self._documents.write(
                    identity.tenant, uri, data, expected_sha256=stored.sha256, deadline=deadline
                )
            except Aborted:
                await after_conflict(attempt, remembered=not fresh)
                continue
            self._remember(identity, slot, StoredDocument(data, sha))
            return changed, True
        raise Aborted(f"stream state of {identity.stream_id} is contended; retry the call")
