"""Small JSON documents kept in OpenViking's own filesystem (no new database, docs/design.md §12).

Engine state, checkpoints and provenance live under the user's space in
`viking://~/resources/.contextengine/`, written with deferred processing so they are never
embedded or returned by memory search. Updates are compare-and-swap on the content's sha256
(`expected_sha256` of batch-write); directory creation (`mkdir`, which refuses an existing
directory) is the create-once primitive.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.errors import Aborted, BackendConflict, BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.content import FsStat
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache

ENGINE_ROOT = "viking://~/resources/.contextengine"
TORN_READ_ATTEMPTS = 5
REMEMBERED_DOCUMENTS = 4_096
"""Documents a `DocumentUpdates` remembers as it last wrote them."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class StoredDocument:
    data: dict[str, Any]
    sha256: str


async def back_off(attempt: int) -> None:
    """The pause before the next compare-and-swap after a conflict with a live competitor."""
    await asyncio.sleep(random.uniform(0.01, 0.05 * (attempt + 1)))


async def after_conflict(attempt: int, *, remembered: bool) -> None:
    """After a compare-and-swap was refused. Against a version the caller remembered, it says only
    that another writer came in since (a compaction's hand-off, a sweep, another replica): read
    again at once (measured: the first turn after each compaction waited 10-50 ms for nothing).
    Against a fresh read it is contention: back off."""
    if not remembered:
        await back_off(attempt)


class DocumentStore:
    def __init__(self, openviking: OpenVikingClient) -> None:
        self._ov = openviking

    async def read(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> StoredDocument | None:
        """The document, or None when absent. A document caught mid-rewrite (OpenViking replaces
        files in place) reads as empty or cut short: it is read again, then reported as Aborted."""
        for attempt in range(TORN_READ_ATTEMPTS):
            try:
                text = await self._ov.read(tenant, uri, deadline=deadline)
            except BackendNotFound:
                return None
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                await asyncio.sleep(0.02 * (attempt + 1))
                continue
            return StoredDocument(data, sha256_text(text))
        raise Aborted(f"{uri} is being rewritten; retry the call")

    async def entry(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> FsStat | None:
        """What is at `uri` (a file or a directory), or None when nothing is."""
        try:
            return await self._ov.stat(tenant, uri, deadline=deadline)
        except BackendNotFound:
            return None

    async def remove(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> None:
        """Delete the document (a missing one is no error)."""
        await self._ov.rm(tenant, uri, deadline=deadline)

    async def ensure_directory(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> bool:
        """Create `uri` (and parents); True when this call created it."""
        try:
            await self._ov.mkdir(tenant, uri, deadline=deadline)
        except BackendConflict:
            return False
        except BackendNotFound:
            parent = uri.rstrip("/").rsplit("/", 1)[0]
            await self.ensure_directory(tenant, parent, deadline=deadline)
            return await self.ensure_directory(tenant, uri, deadline=deadline)
        return True

    async def write(
        self,
        tenant: Tenant,
        uri: str,
        data: dict[str, Any],
        *,
        expected_sha256: str | None = None,
        deadline: float | None = None,
    ) -> str:
        """Write `data`; with `expected_sha256` only if the stored content is unchanged.

        Raises `Aborted` when another writer changed the document first.
        """
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        operation: dict[str, Any] = {"uri": uri, "content": text, "mode": "replace"}
        if expected_sha256 is not None:
            operation["expected_sha256"] = expected_sha256
        root = uri.rsplit("/", 1)[0]
        try:
            await self._ov.batch_write(
                tenant, root, [operation], wait=False, defer_processing=True, deadline=deadline
            )
        except BackendConflict as exc:
            raise Aborted(f"{uri} changed concurrently: {exc.message}") from exc
        except BackendNotFound:
            await self.ensure_directory(tenant, root, deadline=deadline)
            await self._ov.batch_write(
                tenant, root, [operation], wait=False, defer_processing=True, deadline=deadline
            )
        return sha256_text(text)


class DocumentUpdates:
    """Read-modify-write of small documents by compare-and-swap, each remembered as this process
    last read or wrote it: changing a document it wrote last costs one write, not a read and a
    write. When another writer changed it first, the swap is refused and the document read again,
    so a stale memo costs a retry, never a lost change. A change that changes nothing writes
    nothing, decided on a fresh read only (the memo may hide another writer's change)."""

    def __init__(self, store: DocumentStore, remembered: int = REMEMBERED_DOCUMENTS) -> None:
        self._store = store
        self._known: SizedCache[tuple[Tenant, str], StoredDocument] = SizedCache(remembered)

    async def change(
        self,
        tenant: Tenant,
        uri: str,
        apply: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        attempts: int,
        deadline: float | None = None,
    ) -> bool:
        """Store `apply(current data)` (`{}` when there is none yet) unless it equals the current
        data (False: nothing written); `apply` must not mutate its argument. Raises `Aborted`
        when other writers won `attempts` times in a row."""
        key = (tenant, uri)
        document = self._known.pop(key)
        for _ in range(attempts):
            fresh = document is None
            if document is None:
                document = await self._store.read(tenant, uri, deadline=deadline)
            current = document.data if document is not None else {}
            data = apply(current)
            if data == current:
                if not fresh:
                    document = None  # remembered, perhaps stale: read it before writing nothing
                    continue
                if document is not None:
                    self._known.put(key, document)
                return False
            try:
                sha256 = await self._store.write(
                    tenant,
                    uri,
                    data,
                    expected_sha256=document.sha256 if document is not None else None,
                    deadline=deadline,
                )
            except Aborted:
                document = None
                continue
            self._known.put(key, StoredDocument(data, sha256))
            return True
        raise Aborted(f"{uri} changed concurrently too often; retry the call")
