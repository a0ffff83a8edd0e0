"""The stream's raw turns, read back from its OpenViking sessions (live messages and archives)."""

from __future__ import annotations

from collections.abc import Sequence

from shared.domain.archives import archive_messages_uri, engine_turns, parse_session_messages, session_uri
from shared.domain.envelope import PersistedTurn
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.sessions import SessionMessage
from shared.openviking.tenant import Tenant


async def _read_messages(
    openviking: OpenVikingClient, tenant: Tenant, uri: str, deadline: float | None
) -> list[SessionMessage]:
    try:
        return parse_session_messages(await openviking.read(tenant, uri, raw=True, deadline=deadline))
    except BackendNotFound:
        return []


async def _session_files(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, deadline: float | None
) -> list[tuple[str, list[SessionMessage]]]:
    """(file URI, its messages) of one OpenViking session: archives oldest first, then the live file."""
    base = session_uri(tenant, session_id)
    try:
        listing = await openviking.ls(tenant, f"{base}/history", deadline=deadline)
    except BackendNotFound:
        listing = None
    uris: list[str] = []
    if listing is not None:
        archives = sorted(entry.uri for entry in listing.entries if entry.is_dir and "/archive_" in entry.uri)
        uris += [archive_messages_uri(archive) for archive in archives]
    uris.append(f"{base}/messages.jsonl")
    return [(uri, await _read_messages(openviking, tenant, uri, deadline)) for uri in uris]


async def session_messages(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, *, deadline: float | None = None
) -> list[SessionMessage]:
    """Every message of one OpenViking session as stored: archives oldest first, then the live ones."""
    files = await _session_files(openviking, tenant, session_id, deadline)
    return [message for _uri, messages in files for message in messages]


async def session_turns(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, *, deadline: float | None = None
) -> list[PersistedTurn]:
    """Every engine-written turn of one OpenViking session, archived or live, by sequence."""
    return engine_turns(await session_messages(openviking, tenant, session_id, deadline=deadline))


async def located_session_turns(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, *, deadline: float | None = None
) -> list[tuple[str, PersistedTurn]]:
    """Every engine-written turn of one OpenViking session with the file it is in (an archive's
    `messages.jsonl` once committed: OpenViking reads the live file as empty then), by sequence."""
    located: dict[str, tuple[str, PersistedTurn]] = {}
    for uri, messages in await _session_files(openviking, tenant, session_id, deadline):
        for turn in engine_turns(messages):
            located.setdefault(turn.turn_id, (uri, turn))
    return sorted(located.values(), key=lambda item: item[1].sequence)


async def newest_turns(
    openviking: OpenVikingClient,
    tenant: Tenant,
    sessions: Sequence[str],
    count: int,
    *,
    deadline: float | None = None,
) -> list[tuple[str, PersistedTurn]]:
    """The newest `count` turns over the stream's sessions (oldest first), with their session."""
    collected: dict[str, tuple[str, PersistedTurn]] = {}
    for session_id in reversed(sessions):
        for turn in await session_turns(openviking, tenant, session_id, deadline=deadline):
            collected.setdefault(turn.turn_id, (session_id, turn))
        if len(collected) >= count:
            break
    ordered = sorted(collected.values(), key=lambda item: item[1].sequence)
    return ordered[-count:] if count > 0 else []
