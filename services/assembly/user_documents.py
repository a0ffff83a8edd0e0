"""The user's skill-use and tool-experience documents (capture writes them), per replica.

Each is kept for `USER_DOCUMENT_TTL_SECONDS` (a capture in the same process drops it at once,
`MemoryChanges`). Past it, it is read again only if it changed: one listing of the engine's folder
per call (`EngineFolder`, shared by both documents) gives each file's modTime and size, and a
document whose listing entry is the one it was read with is kept. An entry written less than
`DOCUMENT_SETTLE_SECONDS` before the listing vouches for nothing (modTime has whole seconds: a
second write in the same second could leave it as it was), and the document is read again. A
host asking less often than the TTL read both documents on every call; now one `ls`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.assembly.folder_versions import Version, folder_versions
from services.assembly.ports import AssemblyBackend
from services.assembly.tenant_cache import TenantCache
from shared.domain.documents import ENGINE_ROOT
from shared.errors import BackendNotFound
from shared.openviking.mod_times import settled
from shared.openviking.tenant import Tenant

USER_DOCUMENT_TTL_SECONDS = 30.0
"""How long a replica reuses a user's document as it is, without looking at the listing."""
DOCUMENT_SETTLE_SECONDS = 10.0
"""A listing entry younger than this (by this replica's clock) vouches for nothing."""

ABSENT: Version = ("", -1)
"""The version of a document the folder does not hold."""


@dataclass(frozen=True)
class UserDocument:
    data: dict[str, Any]
    version: Version | None
    """The listing entry it was read with, if that entry vouches for it (None: read it again)."""


UserDocuments = TenantCache[str, UserDocument]


def user_documents_cache() -> UserDocuments:
    return TenantCache(USER_DOCUMENT_TTL_SECONDS)


class EngineFolder:
    """The user's documents one call reads, and the one listing of the engine folder they share
    (made at most once)."""

    def __init__(
        self,
        client: AssemblyBackend,
        tenant: Tenant,
        deadline: float,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._tenant = tenant
        self._deadline = deadline
        self._now = now
        self._listing: asyncio.Future[dict[str, Version] | None] | None = None

    async def versions(self) -> dict[str, Version] | None:
        """File name -> version; None when the listing failed (it only saves reads)."""
        if self._listing is None:
            self._listing = asyncio.ensure_future(self._list())
        return await asyncio.shield(self._listing)

    async def document(self, cache: UserDocuments, uri: str) -> dict[str, Any]:
        """The document at `uri` ({} when there is none), from `cache` while current."""
        client, tenant, deadline = self._client, self._tenant, self._deadline

        async def read() -> dict[str, Any]:
            try:
                data = json.loads(await client.read(tenant, uri, deadline=deadline))
            except BackendNotFound:
                return {}
            return data if isinstance(data, dict) else {}

        async def load() -> UserDocument:
            # Read beside the listing: a write landing between the two is younger than the settle
            # window at the listing, so the version never vouches for an older text.
            data, versions = await asyncio.gather(read(), self.versions())
            return UserDocument(data, _vouched(versions, uri, self._now()))

        async def revalidate(earlier: UserDocument) -> UserDocument:
            version = _vouched(await self.versions(), uri, self._now())
            if earlier.version is not None and version == earlier.version:
                return earlier
            return UserDocument(await read(), version)  # read after the listing: never older than it

        return (await cache.get(tenant, uri, load, revalidate=revalidate)).data

    async def _list(self) -> dict[str, Version] | None:
        versions = await folder_versions(self._client, self._tenant, ENGINE_ROOT, deadline=self._deadline)
        return None if versions is None else {_name_of(uri): v for uri, v in versions.items()}


def _name_of(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def _vouched(versions: dict[str, Version] | None, uri: str, now: float) -> Version | None:
    if versions is None:
        return None
    version = versions.get(_name_of(uri), ABSENT)
    return version if version == ABSENT or settled(version[0], now, DOCUMENT_SETTLE_SECONDS) else None
