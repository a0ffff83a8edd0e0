"""Documents created exactly once (a stream's state, a checkpoint), and how their creation
survives a creator that failed.

OpenViking 0.5.2 has no create-if-absent for files: `create` overwrites, `expected_sha256` on a
missing file is a conflict, `mv` overwrites. Its one create-once primitive is `mkdir`, which
also refuses a path holding a file, while a file write refuses a path holding a directory.

So such a document lives in *slots*: `<name>.json`, then `<name>.1.json`, `<name>.2.json`, ...
The document is the first slot holding a file. Each slot has exactly one creator, chosen by
`mkdir`: slot 0's is the replica whose `mkdir` of the layout's first claim won, slot n's the one
whose `mkdir` of slot n-1's path won. A creator writes its slot once, unconditionally; every later
write is a compare-and-swap. A reader that found no document (OpenViking answering "not found"
while it shuts down included) can never overwrite one that exists.

A creator that failed before its write landed (OpenViking restarting, the replica killed) would
leave the document uncreated for good. Once its claim is `TAKEOVER_AFTER_SECONDS` old (by
OpenViking's clock), any replica *fences* the empty slot with a `mkdir` of its path. That `mkdir`
fails if the creator's file landed first, and makes a later landing of it fail; its winner
creates the next slot. A slot never gets a second unconditional write, by construction: timing
decides only when a takeover happens, never whether a stored document can be overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared.domain.documents import ENGINE_ROOT, DocumentStore, StoredDocument
from shared.errors import Aborted, BackendInvalidArgument
from shared.openviking.tenant import Tenant

TAKEOVER_AFTER_SECONDS = 30.0
"""Age of a creation claim whose slot is still empty after which another replica takes over.
Well above a creation's write (tens of milliseconds; seconds on a busy OpenViking): taking over
a live creation is safe but fails that creator's call."""


def stream_dir(stream_id: str) -> str:
    return f"{ENGINE_ROOT}/streams/{stream_id}"


@dataclass(frozen=True)
class SlotLayout:
    """Where one create-once document's slots and the claim of its first slot are."""

    folder: str
    name: str
    first_claim: str
    """The directory whose `mkdir` chooses slot 0's creator."""

    def slot_uri(self, slot: int) -> str:
        return f"{self.folder}/{self.name}.json" if slot == 0 else f"{self.folder}/{self.name}.{slot}.json"

    def claim_uri(self, slot: int) -> str:
        """The directory whose `mkdir` chose `slot`'s creator."""
        return self.first_claim if slot == 0 else self.slot_uri(slot - 1)


def stream_state_layout(stream_id: str) -> SlotLayout:
    """`streams/<stream>/state.json`; the stream's folder is its state's first claim."""
    return SlotLayout(stream_dir(stream_id), "state", stream_dir(stream_id))


def checkpoint_layout(stream_id: str, checkpoint_id: str) -> SlotLayout:
    """`streams/<stream>/checkpoints/<id>.json`, claimed by the folder `<id>.claim` beside it."""
    folder = f"{stream_dir(stream_id)}/checkpoints"
    return SlotLayout(folder, checkpoint_id, f"{folder}/{checkpoint_id}.claim")


@dataclass(frozen=True)
class SlotRead:
    """The first slot of a document that is not fenced, and what it holds (None: not created)."""

    slot: int
    stored: StoredDocument | None


class DocumentSlots:
    def __init__(self, documents: DocumentStore) -> None:
        self._documents = documents

    async def read(self, tenant: Tenant, layout: SlotLayout, *, deadline: float | None) -> SlotRead:
        slot = 0
        while True:
            uri = layout.slot_uri(slot)
            try:
                return SlotRead(slot, await self._documents.read(tenant, uri, deadline=deadline))
            except BackendInvalidArgument:
                if not await self._fenced(tenant, uri, deadline):
                    raise
            slot += 1

    async def claim(
        self, tenant: Tenant, layout: SlotLayout, slot: int, *, deadline: float | None
    ) -> int | None:
        """The slot this caller is now the sole creator of, or None while another replica is
        creating `slot` (or has just created it: read again)."""
        documents = self._documents
        if slot == 0 and await documents.ensure_directory(tenant, layout.first_claim, deadline=deadline):
            return 0
        claimed = await documents.entry(tenant, layout.claim_uri(slot), deadline=deadline)
        if claimed is None or not _older_than(claimed.mod_time, TAKEOVER_AFTER_SECONDS):
            return None
        if await documents.ensure_directory(tenant, layout.slot_uri(slot), deadline=deadline):
            return slot + 1
        return None

    async def create(
        self, tenant: Tenant, layout: SlotLayout, slot: int, data: dict[str, Any], *, deadline: float | None
    ) -> StoredDocument:
        """The one unconditional write of `slot`, by its creator (see `claim`)."""
        uri = layout.slot_uri(slot)
        try:
            sha = await self._documents.write(tenant, uri, data, deadline=deadline)
        except BackendInvalidArgument:
            if await self._fenced(tenant, uri, deadline):
                raise Aborted(f"{uri} was taken over by another replica; retry the call") from None
            raise
        return StoredDocument(data, sha)

    async def _fenced(self, tenant: Tenant, uri: str, deadline: float | None) -> bool:
        entry = await self._documents.entry(tenant, uri, deadline=deadline)
        return entry is not None and entry.is_dir


def _older_than(mod_time: str, seconds: float) -> bool:
    try:
        when = datetime.fromisoformat(mod_time)
    except ValueError:
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (datetime.now(UTC) - when).total_seconds() >= seconds
