"""A folder's listing as versions: each entry's (modTime, size). A replica compares it with the
one it read something with to tell whether that changed, instead of reading it again (the
profile's preferences, the user's documents)."""

from __future__ import annotations

from services.assembly.recall import bounded
from shared.domain.turn_index_folders import FolderLister
from shared.errors import BackendNotFound
from shared.openviking.tenant import Tenant

Version = tuple[str, int]
"""An entry's (modTime, size)."""


async def folder_versions(
    lister: FolderLister,
    tenant: Tenant,
    uri: str,
    *,
    deadline: float,
    recursive: bool = False,
    node_limit: int | None = None,
) -> dict[str, Version] | None:
    """Entry URI -> version, hidden entries included; {} when the folder does not exist; None
    when the listing failed or was cut. Never raises: a listing only saves reads."""
    try:
        listing = await bounded(
            lister.ls(
                tenant,
                uri,
                recursive=recursive,
                show_all_hidden=True,
                node_limit=node_limit,
                deadline=deadline,
            ),
            deadline,
        )
    except BackendNotFound:
        return {}
    except Exception:
        return None
    if listing.has_more:
        return None
    return {e.uri: (e.mod_time, e.size) for e in listing.entries}
