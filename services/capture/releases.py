"""Releases of landed appends, kept off the caller's path (`services.capture.transcript`).

Once a claim's messages are in OpenViking, clearing the claim and adding its counters (the
release) need not delay the caller: the answer is known from the claimed state. This replica
*owes* the release and writes it one way or the other, whichever comes first:

- folded into its next claim of the stream (the same compare-and-swap releases and claims);
- alone, `RELEASE_GRACE_SECONDS` after the append (or at once on `settle` / `drain`).

Every release is conditioned on the claim still being the one stored, so it is applied at most
once whoever writes it. If this replica dies owing a release, the claim goes stale and the next
caller's repair reads back what landed and counts it (exactly what the release would have done).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore

log = logging.getLogger(__name__)

RELEASE_GRACE_SECONDS = 0.2
"""How long an owed release waits for the stream's next claim to fold it in before it is
written alone (a host's next turn on the same replica usually comes sooner when busy)."""

Release = Callable[[StreamState], bool]
"""Applies a landed claim's release to the state when that claim is still stored (True)."""

StreamKey = tuple[str, str, str]


def stream_key(identity: RequestIdentity) -> StreamKey:
    return (identity.tenant.account_id, identity.tenant.user_id, identity.stream_id)


@dataclass
class _Owed:
    claim: PendingWrite
    release: Release
    now: asyncio.Event = field(default_factory=asyncio.Event)
    written: asyncio.Task[None] | None = None
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by the write alone, or by a claim of the stream that folds it in: they never race."""


class OwedReleases:
    """The releases this replica owes, one per stream at most (a stream has one claim)."""

    def __init__(self, states: StreamStateStore, *, grace: float = RELEASE_GRACE_SECONDS) -> None:
        self._states = states
        self._grace = grace
        self._owed: dict[StreamKey, _Owed] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        return len(self._owed)

    def owe(self, identity: RequestIdentity, claim: PendingWrite, release: Release) -> None:
        """Record that `claim` landed; its release is written soon unless a claim folds it first."""
        owed = _Owed(claim, release)
        self._owed[stream_key(identity)] = owed
        owed.written = asyncio.create_task(
            self._write_later(identity, owed), name=f"release-{identity.buffer_key}-{claim.start_sequence}"
        )
        self._tasks.add(owed.written)
        owed.written.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def claiming(self, identity: RequestIdentity) -> AsyncIterator[None]:
        """Around a claim's compare-and-swap: the release owed on the stream is folded into it, not
        written alone meanwhile (the two would only make each other's compare-and-swap fail)."""
        owed = self._owed.get(stream_key(identity))
        if owed is None:
            yield
            return
        async with owed.turn:
            yield

    def fold(self, identity: RequestIdentity, current: StreamState) -> bool:
        """Inside a compare-and-swap: apply the release owed on `current` if its claim is stored."""
        owed = self._owed.get(stream_key(identity))
        return owed is not None and owed.release(current)

    def observe(self, identity: RequestIdentity, state: StreamState) -> None:
        """`state` was just read or written: a claim no longer stored needs no release from us
        (it was released, folded into a claim, or taken over by a repair that counts it)."""
        key = stream_key(identity)
        owed = self._owed.get(key)
        if owed is not None and state.pending_write != owed.claim:
            del self._owed[key]
            owed.now.set()  # its writer wakes up to find nothing owed

    async def settle(self, identity: RequestIdentity) -> None:
        """Write the release owed on this stream now (before a flush reads the counters)."""
        owed = self._owed.get(stream_key(identity))
        if owed is not None and owed.written is not None:
            owed.now.set()
            await asyncio.shield(owed.written)

    async def drain(self) -> None:
        """Write every owed release now (shutdown); bound it with a timeout."""
        for owed in list(self._owed.values()):
            owed.now.set()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write_later(self, identity: RequestIdentity, owed: _Owed) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(owed.now.wait(), self._grace)

        def release(current: StreamState) -> StreamState | None:
            return current if owed.release(current) else None

        async with owed.turn:
            if self._owed.get(stream_key(identity)) is not owed:
                return  # folded into a claim meanwhile
            try:
                await self._states.update(identity, release)
            except Exception:  # the next claim folds it in, or the stale-claim repair counts it
                log.warning("could not release claim of %s yet", identity.buffer_key, exc_info=True)
                return
            if self._owed.get(stream_key(identity)) is owed:
                del self._owed[stream_key(identity)]
