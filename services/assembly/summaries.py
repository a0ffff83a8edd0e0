"""Where the compact summaries of a stream come from: its checkpoints.

`SummarySource` is the narrow seam; `CheckpointSummaries` reads the stream's newest checkpoint
documents (which the engine's stream state lists, `stream_checkpoints`, reused by a replica for
`STREAM_SESSIONS_TTL_SECONDS`). Each committed checkpoint carries what stands in for its
archived turns (`CheckpointRecord.shown_summary`): OpenViking's archive summary when an LLM wrote
one, else the engine's own extractive summary, written at commit
(`services.compaction.engine_summary`). Without an LLM OpenViking writes only a count-only
placeholder, so before the engine wrote its own a continuing session's compacted part never
reached the model. Each summary names its checkpoint and archive, so `memory_expand` of either
returns the raw turns it stands for. Before them comes the oldest shown checkpoint's `earlier`
summary, a summary of the summaries of every checkpoint before it
(`services.compaction.history`): a long session's whole past within a few summaries' tokens.

A finished checkpoint (COMPLETED or FAILED: OpenViking's phase 2 ended) that has its engine
summary is never rewritten, so its summaries are final: a replica remembers them
(`REMEMBERED_SUMMARIES`) instead of reading the checkpoint on every Assemble. A checkpoint still
in flight is read again each time (its LLM summary may land).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Protocol

from contextengine.v1 import packet_pb2

from services.assembly.tenant_cache import TenantCache
from shared.domain.archives import session_uri
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamStateStore
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache

CheckpointResolver = Callable[[RequestIdentity, float, bool], Awaitable[Sequence[str]]]
"""(identity, deadline, opening) -> the stream's newest checkpoint ids, oldest first."""

MAX_SUMMARY_CHECKPOINTS = 3
"""Newest checkpoints whose summaries Assemble reads (packing cuts old summaries first)."""

REMEMBERED_SUMMARIES = 4096
"""Final summaries a replica keeps (by account, user and checkpoint)."""
STREAM_SESSIONS_TTL_SECONDS = 30.0
"""How long an assembly replica reuses a stream's checkpoint list (one stream-state read), and
how old a listing of the user's turn index may be to vouch that a stream has none
(`IndexedSessions`). Commits, engine summaries and phase-2 ends made in the same process drop
both at once (`shared.domain.memory_changes`). Elsewhere a new summary shows at most this much
later; until it shows, packing keeps the stream's raw turns and recall finds every exchange.
Saves a state read per Assemble, which also ran on OpenViking beside the `find` and slowed it."""
SUMMARY_RECHECK_SECONDS = 600.0
"""A remembered summary is read again after this long (bounds what a repair could leave stale)."""


class IndexedSessions(Protocol):
    """The streams whose sessions a user's turn index held at a recent listing (`ExchangeIndex`,
    whose background sync lists them anyway)."""

    def streams_listed(self, tenant: Tenant, max_age: float) -> Collection[str] | None: ...


class SummarySource(Protocol):
    async def latest_summaries(
        self, identity: RequestIdentity, deadline: float, *, opening: bool = False
    ) -> list[packet_pb2.CompactSummary]:
        """`opening`: the host sent nothing before the prompt (a stream's first call, or one
        whose host transcript restarted)."""
        ...


StreamCheckpointsCache = TenantCache[str, Sequence[str]]
"""A stream's newest checkpoint ids by stream id, within a tenant."""


def stream_checkpoints_cache(
    ttl: float = STREAM_SESSIONS_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
) -> StreamCheckpointsCache:
    return TenantCache(ttl, clock=clock)


def stream_checkpoints(
    store: StreamStateStore,
    cache: StreamCheckpointsCache | None = None,
    indexed: IndexedSessions | None = None,
) -> CheckpointResolver:
    """Resolver over the engine's stream state: the stream's newest checkpoints, read at most
    once per `cache`'s TTL (every time without one), and not at all on an opening call of a
    stream none of whose exchanges the user's turn index held at a listing `indexed` vouches for
    (`never_indexed`)."""

    async def read(identity: RequestIdentity, deadline: float) -> Sequence[str]:
        state = await store.load(identity, deadline=deadline)
        return [] if state is None else state.checkpoint_ids[-MAX_SUMMARY_CHECKPOINTS:]

    async def resolve(identity: RequestIdentity, deadline: float, opening: bool) -> Sequence[str]:
        if opening and indexed is not None and never_indexed(indexed, identity):
            return []
        if cache is None:
            return await read(identity, deadline)
        return await cache.get(identity.tenant, identity.stream_id, lambda: read(identity, deadline))

    return resolve


def never_indexed(indexed: IndexedSessions, identity: RequestIdentity) -> bool:
    """Whether the user's turn index, listed at most `STREAM_SESSIONS_TTL_SECONDS` ago, held no
    session of the stream: then the stream had no checkpoint at that listing, since a compaction
    indexes its session's exchanges before it commits them (`SessionCommit`). A checkpoint made
    since shows once a listing holds its session, the staleness the checkpoint cache allows;
    asked only when the host sent nothing before the prompt: a stream compacted within a
    listing's age is a live one, whose host transcript goes on. The first call of a new session
    then costs no state read: OpenViking serves one request at a time, and that read (~2 ms of its
    CPU) landed on recall's `find` (hard recall tier, 10,000 exchanges: Assemble's first call
    1.46x one `find` with it, 1.40x without; in process 1.36x and 1.27x)."""
    listed = indexed.streams_listed(identity.tenant, STREAM_SESSIONS_TTL_SECONDS)
    return listed is not None and identity.stream_id not in listed


def compact_summary(identity: RequestIdentity, record: CheckpointRecord) -> packet_pb2.CompactSummary:
    return packet_pb2.CompactSummary(
        session_uri=session_uri(identity.tenant, record.session_id),
        overview=record.shown_summary,
        archive_uri=record.archive_uri,
        checkpoint_id=record.checkpoint_id,
    )


def earlier_summary(record: CheckpointRecord) -> packet_pb2.CompactSummary | None:
    """The summary of every checkpoint before `record` (`services.compaction.history`)."""
    if record.earlier is None or not record.earlier.text:
        return None
    return packet_pb2.CompactSummary(
        overview=record.earlier.text, checkpoint_id=f"{record.checkpoint_id}/earlier"
    )


_Shown = tuple[packet_pb2.CompactSummary | None, packet_pb2.CompactSummary | None]


class CheckpointSummaries:
    """The summaries of the stream's newest committed checkpoints; one without any is left out."""

    def __init__(
        self,
        checkpoints: CheckpointStore,
        resolve: CheckpointResolver,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._checkpoints = checkpoints
        self._resolve = resolve
        self._clock = clock
        self._final: SizedCache[tuple[str, str, str], tuple[_Shown, float]] = SizedCache(REMEMBERED_SUMMARIES)

    async def latest_summaries(
        self, identity: RequestIdentity, deadline: float, *, opening: bool = False
    ) -> list[packet_pb2.CompactSummary]:
        """Oldest first: the summary of the checkpoints before those shown, then theirs."""
        checkpoint_ids = await self._resolve(identity, deadline, opening)
        found = await asyncio.gather(*(self._summaries(identity, c, deadline) for c in checkpoint_ids))
        if not found:
            return []
        earlier, own = found[0]
        return [s for s in (earlier, own, *(own for _earlier, own in found[1:])) if s is not None]

    async def _summaries(self, identity: RequestIdentity, checkpoint_id: str, deadline: float) -> _Shown:
        """(the summary of the checkpoints before it, its own summary) of one checkpoint."""
        key = (identity.tenant.account_id, identity.tenant.user_id, checkpoint_id)
        remembered = self._final.get(key)
        if remembered is not None and self._clock() - remembered[1] < SUMMARY_RECHECK_SECONDS:
            return remembered[0]
        record = await self._checkpoints.read(identity.tenant, checkpoint_id, deadline=deadline)
        if record is None or not record.archive_uri:
            return None, None  # not committed (yet): its turns are still the host's raw ones
        shown = (earlier_summary(record), compact_summary(identity, record) if record.shown_summary else None)
        if record.is_terminal and record.engine_summary is not None:
            self._final.put(key, (shown, self._clock()))
        return shown
