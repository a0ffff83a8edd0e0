"""Every engine-written message of a stream exactly as OpenViking stores it (no de-duplication):
archives oldest first, then the live messages, session by session."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain.archives import archive_messages_uri, parse_session_messages, session_archives, session_uri
from shared.domain.envelope import persisted_turn
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.sessions import SessionMessage
from shared.openviking.tenant import Tenant


async def _messages(openviking: OpenVikingClient, tenant: Tenant, uri: str) -> list[SessionMessage]:
    try:
        return parse_session_messages(await openviking.read(tenant, uri, raw=True))
    except BackendNotFound:
        return []


@dataclass(frozen=True)
class StoredTurn:
    sequence: int
    turn_id: str
    archived: bool
    """In a committed archive (else a live message of its session)."""


async def stored_turns(
    openviking: OpenVikingClient, tenant: Tenant, sessions: Sequence[str]
) -> list[StoredTurn]:
    """Every stored engine message, in storage order, duplicates kept."""
    stored: list[StoredTurn] = []
    for session_id in sessions:
        sources = [
            (archive_messages_uri(archive), True)
            for archive in await session_archives(openviking, tenant, session_id)
        ]
        sources.append((f"{session_uri(tenant, session_id)}/messages.jsonl", False))
        for uri, archived in sources:
            for message in await _messages(openviking, tenant, uri):
                turn = persisted_turn(message)
                if turn is not None:
                    stored.append(StoredTurn(turn.sequence, turn.turn_id, archived))
    return stored


async def stored_turn_ids(
    openviking: OpenVikingClient, tenant: Tenant, sessions: Sequence[str]
) -> list[tuple[int, str]]:
    """(sequence, turn id) of every stored engine message, in storage order, duplicates kept."""
    return [(t.sequence, t.turn_id) for t in await stored_turns(openviking, tenant, sessions)]
