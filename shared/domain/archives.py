"""What OpenViking archived: a session's archives and the host messages the engine wrote into them."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from pydantic import ValidationError

from shared.domain.envelope import PersistedTurn, persisted_turn
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.sessions import SessionMessage
from shared.openviking.tenant import Tenant

log = logging.getLogger(__name__)

_ARCHIVE_ID = re.compile(r"archive_(\d+)$")


def archive_index_of(archive_uri: str) -> int:
    """1-based archive number (`.../archive_003` -> 3); 0 when unknown."""
    match = _ARCHIVE_ID.search(archive_uri.rstrip("/"))
    return int(match[1]) if match else 0


def session_uri(tenant: Tenant, session_id: str) -> str:
    return f"viking://user/{tenant.user_id}/sessions/{session_id}"


def archive_messages_uri(archive_uri: str) -> str:
    return f"{archive_uri.rstrip('/')}/messages.jsonl"


def parse_session_messages(text: str) -> list[SessionMessage]:
    """A `messages.jsonl` file: one stored message per line (unparseable lines are skipped)."""
    messages: list[SessionMessage] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            messages.append(SessionMessage.model_validate_json(line))
        except ValidationError:
            log.warning("skipping an unparseable session message line")
    return messages


def engine_turns(messages: Sequence[SessionMessage]) -> list[PersistedTurn]:
    """The host messages the engine wrote, by sequence, de-duplicated by turn id."""
    turns: dict[str, PersistedTurn] = {}
    for message in messages:
        turn = persisted_turn(message)
        if turn is not None:
            turns.setdefault(turn.turn_id, turn)
    return sorted(turns.values(), key=lambda t: t.sequence)


async def read_archive_turns(
    openviking: OpenVikingClient, tenant: Tenant, archive_uri: str, *, deadline: float | None = None
) -> list[PersistedTurn]:
    """The archived host messages (readable for pending, completed and failed archives)."""
    try:
        text = await openviking.read(tenant, archive_messages_uri(archive_uri), raw=True, deadline=deadline)
    except BackendNotFound:
        return []
    return engine_turns(parse_session_messages(text))


async def session_archives(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, *, deadline: float | None = None
) -> list[str]:
    """URIs of the session's archives, oldest first (none when the session was never committed)."""
    try:
        listing = await openviking.ls(tenant, f"{session_uri(tenant, session_id)}/history", deadline=deadline)
    except BackendNotFound:
        return []
    return sorted(
        entry.uri.rstrip("/")
        for entry in listing.entries
        if entry.is_dir and _ARCHIVE_ID.search(entry.uri.rstrip("/"))
    )
