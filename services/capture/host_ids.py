"""Ingest's duplicate check: host message ids already stored in the OpenViking session.

Ingest may replay a transcript the stream already holds (an import run twice, a host that
re-sends history); a message whose host id is in the session is dropped, not appended again.
"""

from __future__ import annotations

from services.capture.claims import Candidate
from shared.domain.envelope import HOST_ID_PREFIX
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.sessions import SessionMessage
from shared.openviking.tenant import Tenant

READ_ALL_TOKEN_BUDGET = 100_000_000
"""Token budget for reading every live message of a session."""


async def session_messages(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, deadline: float | None = None
) -> list[SessionMessage]:
    """Every live message of a session (none when it does not exist yet)."""
    try:
        context = await openviking.get_session_context(
            tenant, session_id, token_budget=READ_ALL_TOKEN_BUDGET, deadline=deadline
        )
    except BackendNotFound:
        return []
    return list(context.messages)


async def drop_known_host_ids(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, candidates: list[Candidate]
) -> tuple[list[Candidate], int]:
    """`candidates` less those whose host id the session (or an earlier candidate) has, and how
    many were dropped."""
    if not any(c.message is not None and c.message.id for c in candidates):
        return candidates, 0
    known = {
        ident[len(HOST_ID_PREFIX) :]
        for stored in await session_messages(openviking, tenant, session_id)
        for ident in stored.source_message_ids
        if ident.startswith(HOST_ID_PREFIX) and len(ident) > len(HOST_ID_PREFIX)
    }
    kept: list[Candidate] = []
    duplicates = 0
    for candidate in candidates:
        host_id = candidate.message.id if candidate.message is not None else ""
        if host_id and host_id in known:
            duplicates += 1
            continue
        if host_id:
            known.add(host_id)
        kept.append(candidate)
    return kept, duplicates
