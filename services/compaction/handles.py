"""Resolving a recalled exchange's short handle (`t<digest>.<sequence>`) to its session.

The handle names the session by a digest (`shared.domain.recall_handles`), so resolving it lists
the caller's turn-index folders once (paged `ls`) and hashes their names. Only `memory_expand`
of a handle pays this; recall itself never does.
"""

from __future__ import annotations

from shared.domain.recall_handles import TurnHandle, sessions_for
from shared.domain.turn_index import TURN_INDEX_ROOT
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

LIST_PAGE = 1000


async def turn_index_sessions(ov: OpenVikingClient, tenant: Tenant, deadline: float) -> list[str]:
    """The session ids that have turn-index folders in the caller's space."""
    sessions: list[str] = []
    offset = 0
    while True:
        try:
            listing = await ov.ls(
                tenant, TURN_INDEX_ROOT, node_limit=LIST_PAGE, offset=offset, deadline=deadline
            )
        except BackendNotFound:
            return sessions
        sessions += [e.uri.rstrip("/").rsplit("/", 1)[-1] for e in listing.entries if e.is_dir]
        if not listing.has_more or not listing.entries:
            return sessions
        offset += len(listing.entries)


async def session_of(ov: OpenVikingClient, tenant: Tenant, handle: TurnHandle, deadline: float) -> str | None:
    """The session the handle names (the first listed when two share its digest), None if none."""
    matches = sessions_for(handle, await turn_index_sessions(ov, tenant, deadline))
    return matches[0] if matches else None
