"""Where the latest compact summaries of a stream come from.

`SummarySource` is the narrow seam; `OpenVikingSessionSummaries` reads the
`latest_archive_overview` of the stream's OpenViking session(s) from `GET /sessions/{id}/context`.
Which OpenViking sessions belong to a stream is decided by the engine's stream state
(`stream_sessions`), which a replica reuses for `STREAM_SESSIONS_TTL_SECONDS`.

A committed session is never written again (its stream moved on to a new session in the same
compare-and-swap that handed the compaction off), so once OpenViking has summarised it, its
overview is final: a replica remembers it (`REMEMBERED_OVERVIEWS`) instead of reading the
session's context on every Assemble. So is the absence of one once the session's compaction is
settled (no longer in the stream's `inflight`: OpenViking's phase 2 ended): without an LLM,
a count-only overview stays so. An empty or count-only overview of a compaction still in flight
is read again each time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, Protocol

from contextengine.v1 import packet_pb2

from services.assembly.ports import SessionContextReader
from services.assembly.tenant_cache import TenantCache
from shared.domain.checkpoints import is_placeholder_summary
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamStateStore
from shared.errors import BackendNotFound
from shared.sized_cache import SizedCache


class CommittedSession(NamedTuple):
    session_id: str
    settled: bool
    """Its compaction is no longer in flight: whatever overview it has now is final."""


SessionIdResolver = Callable[[RequestIdentity, float], Awaitable[Sequence[CommittedSession]]]
"""(identity, deadline) -> the stream's committed OpenViking sessions, oldest first."""

MAX_SUMMARY_SESSIONS = 3
"""Newest committed sessions whose overviews Assemble reads (packing cuts old summaries first)."""

OVERVIEW_TOKEN_BUDGET = 8000
"""token_budget passed to OpenViking so that the overview is never dropped for lack of room."""
REMEMBERED_OVERVIEWS = 4096
"""Final overviews a replica keeps (by account, user and session)."""
STREAM_SESSIONS_TTL_SECONDS = 30.0
"""How long an assembly replica reuses a stream's committed sessions (one stream-state read).
Commits and phase-2 ends made in the same process drop them at once
(`shared.domain.memory_changes`). Elsewhere a new summary shows at most this much later: it is
written by OpenViking's phase 2 after the commit anyway (seconds to minutes with an LLM), and
until it shows, packing keeps the stream's raw turns and recall finds every exchange. Saves a
state read per Assemble, which also ran on OpenViking beside the `find` and slowed it."""
OVERVIEW_RECHECK_SECONDS = 600.0
"""A remembered overview is read again after this long (bounds what a late append, committed
again by a repair, could leave stale)."""


class SummarySource(Protocol):
    async def latest_summaries(
        self, identity: RequestIdentity, deadline: float
    ) -> list[packet_pb2.CompactSummary]: ...


StreamSessionsCache = TenantCache[str, Sequence[CommittedSession]]
"""A stream's committed sessions by stream id, within a tenant."""


def stream_sessions_cache(
    ttl: float = STREAM_SESSIONS_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
) -> StreamSessionsCache:
    return TenantCache(ttl, clock=clock)


def stream_sessions(store: StreamStateStore, cache: StreamSessionsCache | None = None) -> SessionIdResolver:
    """Resolver over the engine's stream state: every OpenViking session of the stream, read
    at most once per `cache`'s TTL (every time without one)."""

    async def read(identity: RequestIdentity, deadline: float) -> Sequence[CommittedSession]:
        state = await store.load(identity, deadline=deadline)
        if state is None:
            return []
        # Only committed sessions have an archive overview; the active one never does.
        committed = [s for s in state.sessions if s != state.active_session]
        inflight = {entry.session_id for entry in state.inflight}
        return [CommittedSession(s, s not in inflight) for s in committed[-MAX_SUMMARY_SESSIONS:]]

    async def resolve(identity: RequestIdentity, deadline: float) -> Sequence[CommittedSession]:
        if cache is None:
            return await read(identity, deadline)
        return await cache.get(identity.tenant, identity.stream_id, lambda: read(identity, deadline))

    return resolve


class OpenVikingSessionSummaries:
    """Archive overviews of the stream's OpenViking sessions; a missing session has none."""

    def __init__(
        self,
        client: SessionContextReader,
        resolve: SessionIdResolver,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._resolve = resolve
        self._clock = clock
        self._final: SizedCache[tuple[str, str, str], tuple[str, float]] = SizedCache(REMEMBERED_OVERVIEWS)

    async def latest_summaries(
        self, identity: RequestIdentity, deadline: float
    ) -> list[packet_pb2.CompactSummary]:
        sessions = await self._resolve(identity, deadline)
        overviews = await asyncio.gather(*(self._overview(identity, s, deadline) for s in sessions))
        return [
            packet_pb2.CompactSummary(
                session_uri=f"viking://user/{identity.tenant.user_id}/sessions/{session.session_id}",
                overview=overview,
            )
            for session, overview in zip(sessions, overviews, strict=True)
            if overview
        ]

    async def _overview(self, identity: RequestIdentity, session: CommittedSession, deadline: float) -> str:
        session_id = session.session_id
        key = (identity.tenant.account_id, identity.tenant.user_id, session_id)
        remembered = self._final.get(key)
        if remembered is not None and self._clock() - remembered[1] < OVERVIEW_RECHECK_SECONDS:
            return remembered[0]
        try:
            context = await self._client.get_session_context(
                identity.tenant, session_id, token_budget=OVERVIEW_TOKEN_BUDGET, deadline=deadline
            )
        except BackendNotFound:
            return ""
        overview = context.latest_archive_overview.strip()
        # A count-only placeholder is no summary: it must not displace raw turns.
        if is_placeholder_summary(overview):
            overview = ""
        if overview or session.settled:
            self._final.put(key, (overview, self._clock()))
        return overview
