"""ListCheckpoints: which checkpoint ids a request lists, newest first.

With a host session: that stream's checkpoints (its state's index). Without one: every stream
of the user (the engine's stream directory, one state document each), optionally only one
agent's, merged newest first by the creation time every checkpoint id embeds.
"""

from __future__ import annotations

import asyncio

from shared.domain.checkpoints import CHECKPOINT_ID_PREFIX
from shared.domain.documents import ENGINE_ROOT, DocumentStore
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient

STREAMS_DIR = f"{ENGINE_ROOT}/streams"
STATE_READ_CONCURRENCY = 8
LIST_PAGE = 1000


def created_ms(checkpoint_id: str) -> int:
    """The creation time (epoch ms) a checkpoint id embeds (`cp-<stream>-<ms>-<rand>`)."""
    parts = checkpoint_id.removeprefix(CHECKPOINT_ID_PREFIX).split("-")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 0


class CheckpointListing:
    def __init__(self, openviking: OpenVikingClient) -> None:
        self._ov = openviking
        self._states = StreamStateStore(DocumentStore(openviking))

    async def ids(self, identity: RequestIdentity, *, agent_id: str | None, deadline: float) -> list[str]:
        """Newest first: the session's checkpoints, or (no session id) the user's across sessions."""
        if identity.session_id:
            state = await self._states.load(identity, deadline=deadline)
            return list(reversed(state.checkpoint_ids)) if state else []
        states = await self._user_states(identity, deadline)
        ids = [
            checkpoint_id
            for state in states
            if agent_id is None or state.agent_id == agent_id
            for checkpoint_id in state.checkpoint_ids
        ]
        return sorted(ids, key=lambda c: (created_ms(c), c), reverse=True)

    async def _stream_ids(self, identity: RequestIdentity, deadline: float) -> list[str]:
        stream_ids: list[str] = []
        offset = 0
        while True:
            try:
                listing = await self._ov.ls(
                    identity.tenant, STREAMS_DIR, node_limit=LIST_PAGE, offset=offset, deadline=deadline
                )
            except BackendNotFound:
                return stream_ids
            stream_ids += [e.uri.rstrip("/").rsplit("/", 1)[-1] for e in listing.entries if e.is_dir]
            if not listing.has_more or not listing.entries:
                return stream_ids
            offset += len(listing.entries)

    async def _user_states(self, identity: RequestIdentity, deadline: float) -> list[StreamState]:
        limit = asyncio.Semaphore(STATE_READ_CONCURRENCY)

        async def read(stream_id: str) -> StreamState | None:
            async with limit:
                return await self._states.load_stream(identity.tenant, stream_id, deadline=deadline)

        states = await asyncio.gather(*(read(s) for s in await self._stream_ids(identity, deadline)))
        return [state for state in states if state is not None]
