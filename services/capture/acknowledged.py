"""Completing a stream's acknowledged turns before a flush, a compaction or a shutdown (issue 33).

A turn in a claim with an outbox was answered as stored (`services.capture.outbox`), but it is
in the stream state, not yet in the session. Its completion used to wait for the stream's next
call or the quiet-stream sweep (`services.capture.outbox_sweep`); a flush, a compaction commit
or a shutdown that came first handed off or archived the session without it. Now each of them
completes the stream's claim with an outbox first, whoever owns it:

- this replica's own append is waited for and its release written (`TranscriptWriter.settle`);
- a claim all of whose messages landed is released for its owner (`ClaimRepair.settle_landed`);
- a stale claim (its owner died, or gave up on its append) is completed by the claim repair;
- a claim whose owner may still be appending (refreshed within `STALE_CLAIM_SECONDS`) is waited
  for until it is released or goes stale; past the caller's deadline the call answers ABORTED
  (retry) - never OK without the turn.

Exactly once by construction, not by timing: the completion appends only what it does not
find in the claim's session, and only after its compare-and-swap took the claim over; a live
owner keeps refreshing its claim, so it is never taken over while its append may still land.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from services.capture.claim_repair import ClaimRepair
from services.capture.claims import STALE_CLAIM_SECONDS, is_stale
from services.capture.landed_claims import worth_reading_back
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamStateStore
from shared.errors import Aborted
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
"""How often a claim another replica may still be appending is looked at again."""

OwnAppend = Callable[[RequestIdentity], Awaitable[None]]
"""Finishes this replica's append on the stream and writes the release it owes."""


class AcknowledgedTurns:
    """Completes the claim with an outbox of a stream, whoever holds it."""

    def __init__(
        self,
        states: StreamStateStore,
        repair: ClaimRepair,
        clock: Callable[[], datetime],
        *,
        own_append: OwnAppend | None = None,
        poll: float = POLL_SECONDS,
    ) -> None:
        self._states = states
        self._repair = repair
        self._clock = clock
        self._own_append = own_append
        self._poll = poll

    async def complete(
        self,
        identity: RequestIdentity,
        counter: TokenCounter,
        *,
        deadline: float | None,
        session_id: str = "",
        wait: bool = True,
    ) -> None:
        """Return once no claim with an outbox (on `session_id`, when given) is stored for the
        stream. Raises `Aborted` when one is still being appended by a live owner at `deadline`
        (None: wait as long as it takes; the caller bounds it), or at once unless `wait`."""
        read_back: PendingWrite | None = None
        while True:
            if self._own_append is not None:
                await self._own_append(identity)
            state = await self._states.load(identity, deadline=deadline)
            claim = state.pending_write if state is not None else None
            if claim is None or claim.outbox is None or session_id not in ("", claim.session_id):
                return
            now = self._clock()
            if is_stale(claim, now):
                log.warning("completing the acknowledged claim %d..%d of %s before it is handed off",
                            claim.start_sequence, claim.end_sequence, identity.buffer_key)  # fmt: skip
                await self._repair.repair(identity, claim, counter, deadline=deadline)
                continue
            if claim != read_back and worth_reading_back(claim, now):
                read_back = claim  # once per claim version: a live owner refreshes it
                if await self._repair.settle_landed(identity, claim, counter, deadline):
                    continue
            pause = min(self._poll, STALE_CLAIM_SECONDS - (now - claim.claimed_at).total_seconds())
            if not wait or (deadline is not None and time.monotonic() + pause >= deadline):
                raise Aborted(
                    f"an acknowledged turn of {identity.buffer_key} (positions {claim.start_sequence}.."
                    f"{claim.end_sequence}) is still being stored by another replica; retry"
                )
            await asyncio.sleep(max(0.0, pause))
