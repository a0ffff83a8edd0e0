"""The caller's turn-index folders (one per OpenViking session), listed page by page."""

from __future__ import annotations

from typing import Protocol

from shared.domain.turn_index import TURN_INDEX_ROOT
from shared.errors import BackendNotFound
from shared.openviking.models.content import FsListing
from shared.openviking.tenant import Tenant

LIST_PAGE = 1000


class FolderLister(Protocol):
    async def ls(
        self,
        tenant: Tenant,
        uri: str,
        *,
        recursive: bool = False,
        show_all_hidden: bool = False,
        node_limit: int | None = None,
        offset: int | None = None,
        deadline: float | None = None,
    ) -> FsListing: ...


async def turn_index_folders(
    lister: FolderLister, tenant: Tenant, deadline: float | None = None
) -> dict[str, str]:
    """Session id -> its folder's modification time (OpenViking's `modTime`), in listing order;
    empty when the user has no turn index yet."""
    folders: dict[str, str] = {}
    offset = 0
    while True:
        try:
            listing = await lister.ls(
                tenant, TURN_INDEX_ROOT, node_limit=LIST_PAGE, offset=offset, deadline=deadline
            )
        except BackendNotFound:
            return folders
        for entry in listing.entries:
            if entry.is_dir:
                folders[entry.uri.rstrip("/").rsplit("/", 1)[-1]] = entry.mod_time
        if not listing.has_more or not listing.entries:
            return folders
        offset += len(listing.entries)
