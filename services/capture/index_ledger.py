"""Which claimed exchanges may still be missing from the turn index, kept where every replica
sees it: the stream state (issue 33: kill -9 a replica holding a backlog, and every exchange is
findable once after all).

Capture indexes a claim's exchanges after the caller's answer, batched for up to
`turnIndexCoalesceMs` (`services.capture.backlog`): a replica killed meanwhile takes them with it.
So the claim's compare-and-swap also records its range as *unindexed* (no extra write), and the
replica that indexed it removes the range in a later compare-and-swap of its own (folded into its
next claim of the stream, as releases are). A range still recorded `turnIndexRecoverAfterMs` after
it was claimed belongs to a replica that died or failed to write it: the next claim of the stream,
on any replica, takes it over (its `since` moves to now, in the same compare-and-swap) and indexes
again what of it the session holds and the index lacks (`TurnIndexWriter.catch_up`). Index
documents have deterministic URIs and the catch-up writes only missing ones, so an exchange
indexed twice (its first indexer was only slow) still has one document: exactly once by
construction, late only by timing. A range whose positions never landed (a claim rolled back)
catches up nothing and is removed like any other. Compaction indexes what a session lacks before
it archives it, so only a stream whose last turns a dead replica held and that is never called,
flushed or compacted again would keep them unindexed; a replica that served the stream looks
at it once it is quiet (`services.capture.outbox_sweep`) and indexes again the ranges that went
stale meanwhile (`recover_quiet`). Left: a stream only the dead replica ever served, never called
again, keeps them unindexed until it is.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timedelta

from services.capture.claims import Noter
from services.capture.releases import StreamKey, stream_key
from services.compaction.transcript import session_turns
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, UnindexedRange
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.openviking.client import OpenVikingClient

log = logging.getLogger(__name__)

REMEMBERED_STREAMS = 10_000
"""Streams whose indexed ranges this replica keeps until its next claim of them."""
RangeKey = tuple[str, int, int]
"""(session, first position, last position) of a claim."""


def _key(entry: UnindexedRange) -> RangeKey:
    return (entry.session_id, entry.start, entry.end)


class IndexLedger:
    """This replica's side of `StreamState.unindexed`: the ranges it indexed (to remove) and the
    stale ones it took over (to index again)."""

    def __init__(
        self,
        openviking: OpenVikingClient,
        index: TurnIndexWriter,
        *,
        recover_after: float,
    ) -> None:
        self._ov = openviking
        self._index = index
        self._recover_after = timedelta(seconds=recover_after)
        self._indexed: OrderedDict[StreamKey, set[RangeKey]] = OrderedDict()
        self._recovering: set[asyncio.Task[None]] = set()

    def noter(self, identity: RequestIdentity, now: datetime, taken: list[UnindexedRange]) -> Noter:
        """What a claim's compare-and-swap also writes (`claims.Noter`): the ranges this replica
        indexed leave, stale ones are taken over (recorded in `taken`, to index again once the
        swap is stored), and the claim's own range enters, unindexed until its indexer says so."""

        def note(current: StreamState, claim: PendingWrite) -> None:
            self.fold(identity, current, now, taken)
            current.unindexed.append(
                UnindexedRange(
                    session_id=claim.session_id,
                    start=claim.start_sequence,
                    end=claim.end_sequence,
                    since=claim.claimed_at,
                )
            )

        return note

    def claimed(self, identity: RequestIdentity, state: StreamState, taken: Sequence[UnindexedRange]) -> None:
        """The claim's write is stored: forget the indexed ranges it no longer records, and index
        again, off the caller's path, what it took over."""
        self._stored(identity, state)
        self._recover(identity, taken)

    def indexed(self, identity: RequestIdentity, session_id: str, start: int, end: int) -> None:
        """The claim's exchanges are in the turn index: the range goes with the next claim (a
        stream this replica claims no more is forgotten past `REMEMBERED_STREAMS`: its ranges are
        then looked at again once stale, and found indexed)."""
        key = stream_key(identity)
        self._indexed.setdefault(key, set()).add((session_id, start, end))
        self._indexed.move_to_end(key)
        while len(self._indexed) > REMEMBERED_STREAMS:
            self._indexed.popitem(last=False)

    def fold(
        self, identity: RequestIdentity, current: StreamState, now: datetime, taken: list[UnindexedRange]
    ) -> None:
        """Drop the ranges this replica indexed, take over the stale ones (into `taken`)."""
        taken.clear()
        done = self._indexed.get(stream_key(identity), set())
        kept: list[UnindexedRange] = []
        for entry in current.unindexed:
            if _key(entry) in done:
                continue
            if now - entry.since < self._recover_after:
                kept.append(entry)
                continue
            mine = entry.model_copy(update={"since": now})
            taken.append(mine)
            kept.append(mine)
        current.unindexed = kept

    def recover_quiet(self, identity: RequestIdentity, state: StreamState, now: datetime) -> float | None:
        """A quiet stream's ranges this replica did not index: the stale ones are indexed again
        (off the caller's path; their record leaves with the stream's next claim, if any). The
        seconds until the next of the others goes stale, None if none is left."""
        done = self._indexed.get(stream_key(identity), set())
        owed = [entry for entry in state.unindexed if _key(entry) not in done]
        stale = [entry for entry in owed if now - entry.since >= self._recover_after]
        self._recover(identity, stale)
        waits = [(self._recover_after - (now - entry.since)).total_seconds() for entry in owed]
        return min((w for w in waits if w > 0), default=None)

    def _stored(self, identity: RequestIdentity, state: StreamState) -> None:
        key = stream_key(identity)
        done = self._indexed.get(key)
        if done is None:
            return
        done &= {_key(entry) for entry in state.unindexed}
        if not done:
            del self._indexed[key]

    def _recover(self, identity: RequestIdentity, taken: Sequence[UnindexedRange]) -> None:
        """One task per session of the taken-over ranges (one read of it)."""
        by_session: dict[str, list[UnindexedRange]] = {}
        for entry in taken:
            by_session.setdefault(entry.session_id, []).append(entry)
        for session_id, entries in by_session.items():
            task = asyncio.create_task(
                self._reindex(identity, session_id, entries), name=f"reindex-{session_id}"
            )
            self._recovering.add(task)
            task.add_done_callback(self._recovering.discard)

    async def drain(self) -> None:
        """Wait for the recoveries under way (shutdown; bound it with a timeout)."""
        while self._recovering:
            await asyncio.gather(*list(self._recovering), return_exceptions=True)

    async def _reindex(
        self, identity: RequestIdentity, session_id: str, entries: Sequence[UnindexedRange]
    ) -> None:
        """Write what of the ranges the session holds and the index lacks."""
        try:
            turns = await session_turns(self._ov, identity.tenant, session_id)
            owed = [t for t in turns if any(e.start <= t.sequence <= e.end for e in entries)]
            written = await self._index.catch_up(identity.tenant, session_id, owed) if owed else 0
        except Exception as exc:  # still recorded: the next claim after it goes stale again retries
            log.warning(
                "re-indexing %d range(s) of %s failed: %s", len(entries), session_id, type(exc).__name__
            )
            return
        if written:
            log.info("re-indexed %d exchange(s) of %s left unconfirmed by their indexer", written, session_id)
        for entry in entries:
            self.indexed(identity, session_id, entry.start, entry.end)
