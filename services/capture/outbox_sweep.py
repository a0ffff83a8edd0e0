"""Completes claims with an outbox left on streams that nobody calls again.

A turn in a claim with an outbox was answered as stored (`services.capture.outbox`). If the
replica that owned the claim dies before its append, the claim is completed by the stream's next
call - and when the conversation has ended, there is none. So every capture replica watches the
streams it served: once a stream has been quiet on this replica for `QUIET_SECONDS`, the sweep
reads its state once; a claim with an outbox that went stale is completed (the claim repair), one
that is not stale yet is looked at again when it would be, anything else ends the watch. That is
one state read per stream and replica after the stream goes quiet. The owner of a failed append
looks at its stream the same way (`look_now`) a moment later. The same read finds the ranges a
dead replica claimed and never confirmed in the turn index: those that went stale are indexed
again (`IndexLedger.recover_quiet`), the others are looked at when they would be.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from services.capture.claims import STALE_CLAIM_SECONDS, is_stale
from services.capture.releases import StreamKey, stream_key
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore
from shared.errors import Aborted, BackendError
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

QUIET_SECONDS = STALE_CLAIM_SECONDS + 5.0
"""A stream this replica served is looked at once it has been quiet here this long (by then a
claim its last caller saw taken is stale if its owner died)."""
SWEEP_SECONDS = 10.0

Complete = Callable[[RequestIdentity, PendingWrite, TokenCounter], Awaitable[None]]
"""Completes a stale claim (`ClaimRepair.repair`)."""
RecoverIndex = Callable[[RequestIdentity, StreamState, datetime], float | None]
"""Indexes again the stream's stale unconfirmed ranges; the seconds until the next goes stale
(`IndexLedger.recover_quiet`)."""


@dataclass
class _Watch:
    identity: RequestIdentity
    counter: TokenCounter
    due: float
    """`time.monotonic()` when the stream is looked at."""


class OutboxSweep:
    def __init__(
        self,
        states: StreamStateStore,
        complete: Complete,
        clock: Callable[[], datetime],
        *,
        quiet: float = QUIET_SECONDS,
        every: float = SWEEP_SECONDS,
        recover_index: RecoverIndex | None = None,
    ) -> None:
        self._states = states
        self._complete = complete
        self._recover_index = recover_index
        self._clock = clock
        self._quiet = quiet
        self._every = every
        self._watched: dict[StreamKey, _Watch] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def watched(self) -> int:
        return len(self._watched)

    def served(self, identity: RequestIdentity, counter: TokenCounter) -> None:
        """This replica just served a write call of the stream: look at it once it is quiet."""
        self._watched[stream_key(identity)] = _Watch(identity, counter, time.monotonic() + self._quiet)
        if self._sweeper is None and not self._closing:
            self._sweeper = asyncio.create_task(self._sweep(), name="outbox-sweep")

    async def close(self) -> None:
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)

    async def sweep_once(self) -> None:
        """Look at every watched stream that is due."""
        now = time.monotonic()
        for key, watch in list(self._watched.items()):
            if watch.due > now or self._watched.pop(key, None) is not watch:
                continue
            try:
                await self.look_now(watch.identity, watch.counter)
            except (BackendError, Aborted) as exc:  # looked at again next round
                log.warning("outbox sweep of %s: %s", watch.identity.buffer_key, exc.message)
                self._watched.setdefault(key, watch)
            except Exception:  # not a backend outage: the stream's next call completes it
                log.exception("outbox sweep of %s failed; not watched any more", watch.identity.buffer_key)

    async def look_now(self, identity: RequestIdentity, counter: TokenCounter) -> None:
        """Read the stream's state: a claim with an outbox that went stale is completed, stale
        unconfirmed turn-index ranges are indexed again; what is not stale yet is watched until
        it would be."""
        state = await self._states.load(identity)
        if state is None:
            return
        now = self._clock()
        waits: list[float] = []
        claim = state.pending_write
        if claim is not None and claim.outbox is not None:
            if is_stale(claim, now):
                log.warning("completing the claim %d..%d of %s from its outbox", claim.start_sequence,
                            claim.end_sequence, identity.buffer_key)  # fmt: skip
                await self._complete(identity, claim, counter)
            else:
                waits.append(STALE_CLAIM_SECONDS - (now - claim.claimed_at).total_seconds())
        index_wait = None if self._recover_index is None else self._recover_index(identity, state, now)
        if index_wait is not None:
            waits.append(index_wait)
        if waits:
            due = time.monotonic() + min(waits)
            self._watched.setdefault(stream_key(identity), _Watch(identity, counter, due))

    async def _sweep(self) -> None:
        while not self._closing:
            await asyncio.sleep(self._every)
            await self.sweep_once()
