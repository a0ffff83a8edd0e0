"""Resolving a recalled exchange's short handle (`t<digest>.<sequence>`) to its session.

The handle names the session by a digest (`shared.domain.recall_handles`), so resolving it lists
the caller's turn-index folders once and hashes their names. Only `memory_expand` of a handle
pays this; recall itself never does.
"""

from __future__ import annotations

from shared.domain.recall_handles import TurnHandle, sessions_for
from shared.domain.turn_index_folders import FolderLister, turn_index_folders
from shared.openviking.tenant import Tenant


async def session_of(lister: FolderLister, tenant: Tenant, handle: TurnHandle, deadline: float) -> str | None:
    """The session the handle names (the first listed when two share its digest), None if none."""
    matches = sessions_for(handle, await turn_index_folders(lister, tenant, deadline))
    return matches[0] if matches else None
