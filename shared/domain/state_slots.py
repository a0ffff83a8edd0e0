"""Where a stream's state document lives, and how its creation survives a creator that failed.

OpenViking 0.5.2 has no create-if-absent for files: `create` overwrites, `expected_sha256` on a
missing file is a conflict, `mv` overwrites. Its one create-once primitive is `mkdir`, which
also refuses a path holding a file, while a file write refuses a path holding a directory.

So the state lives in *slots*: `state.json`, then `state.1.json`, `state.2.json`, ... The current
state is the first slot holding a file. Each slot has exactly one creator, chosen by `mkdir`:
slot 0's is the replica whose `mkdir` of the stream directory won, slot n's the one whose `mkdir`
of slot n-1's path won. A creator writes its slot once, unconditionally; every later write is a
compare-and-swap.

A creator that failed before its write landed (OpenViking restarting, the replica killed) would
leave the stream without state for good. Once its claim is `TAKEOVER_AFTER_SECONDS` old (by
OpenViking's clock), any replica *fences* the empty slot with a `mkdir` of its path. That `mkdir`
fails if the creator's file landed first, and makes a later landing of it fail; its winner
creates the next slot. A slot never gets a second unconditional write, by construction: timing
decides only when a takeover happens, never whether a stored state can be overwritten.
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


def slot_uri(stream_id: str, slot: int) -> str:
    name = "state.json" if slot == 0 else f"state.{slot}.json"
    return f"{stream_dir(stream_id)}/{name}"


def claim_uri(stream_id: str, slot: int) -> str:
    """The directory whose `mkdir` chose `slot`'s creator."""
    return stream_dir(stream_id) if slot == 0 else slot_uri(stream_id, slot - 1)


@dataclass(frozen=True)
class SlotRead:
    """The first slot of a stream that is not fenced, and its document (None: not created yet)."""

    slot: int
    stored: StoredDocument | None


class StateSlots:
    def __init__(self, documents: DocumentStore) -> None:
        self._documents = documents

    async def read(self, tenant: Tenant, stream_id: str, *, deadline: float | None) -> SlotRead:
        slot = 0
        while True:
            uri = slot_uri(stream_id, slot)
            try:
                return SlotRead(slot, await self._documents.read(tenant, uri, deadline=deadline))
            except BackendInvalidArgument:
                if not await self._fenced(tenant, uri, deadline):
                    raise
            slot += 1

    async def claim(self, tenant: Tenant, stream_id: str, slot: int, *, deadline: float | None) -> int | None:
        """The slot this caller is now the sole creator of, or None while another replica is
        creating `slot` (or has just created it: read again)."""
        if slot == 0 and await self._documents.ensure_directory(
            tenant, stream_dir(stream_id), deadline=deadline
        ):
            return 0
        claimed = await self._documents.entry(tenant, claim_uri(stream_id, slot), deadline=deadline)
        if claimed is None or not _older_than(claimed.mod_time, TAKEOVER_AFTER_SECONDS):
            return None
        if await self._documents.ensure_directory(tenant, slot_uri(stream_id, slot), deadline=deadline):
            return slot + 1
        return None

    async def create(
        self, tenant: Tenant, stream_id: str, slot: int, data: dict[str, Any], *, deadline: float | None
    ) -> StoredDocument:
        """The one unconditional write of `slot`, by its creator (see `claim`)."""
        uri = slot_uri(stream_id, slot)
        try:
            sha = await self._documents.write(tenant, uri, data, deadline=deadline)
        except BackendInvalidArgument:
            if await self._fenced(tenant, uri, deadline):
                raise Aborted(
                    f"stream state {uri} was taken over by another replica; retry the call"
                ) from None
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
