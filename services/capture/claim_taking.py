"""Taking a stream's claim: the compare-and-swap loop of step 1 in `services.capture.transcript`.

The loop writes the claim (folding in a release this replica owes on the stream), or finds the
stream's range already claimed and then, in order: repairs a stale claim, answers at once when
the whole range sits in a claim with an outbox (it is completed, never rolled back), reads back
a claim whose owner may have died owing its release, or waits for the claim to clear - on this
replica's own append when it holds it, else one poll interval - within the call's time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from services.capture.claim_repair import ClaimRepair
from services.capture.claims import (
    STALE_CLAIM_SECONDS,
    ClaimPlan,
    Packer,
    Planner,
    claimer,
    is_stale,
)
from services.capture.index_ledger import IndexLedger
from services.capture.landed_claims import worth_reading_back
from services.capture.releases import OwedReleases
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore, UnindexedRange
from shared.errors import Aborted
from shared.tokens import TokenCounter

CLAIM_POLL_SECONDS = 0.03
CLAIM_WAIT_ON_OWN_SECONDS = 1.0
"""Longest a claim waits on this replica's own append on the stream before looking again."""
MAX_CLAIM_WAIT_SECONDS = STALE_CLAIM_SECONDS + 5.0

OwnAppend = Callable[[RequestIdentity], "asyncio.Task[Any] | None"]
"""This replica's running append on the identity's stream, if any."""


class ClaimTaker:
    def __init__(
        self,
        states: StreamStateStore,
        releases: OwedReleases,
        repair: ClaimRepair,
        own_append: OwnAppend,
        clock: Callable[[], datetime],
        *,
        ledger: IndexLedger | None = None,
    ) -> None:
        self._states = states
        self._releases = releases
        self._repair = repair
        self._own_append = own_append
        self._clock = clock
        self._ledger = ledger

    def _claimed(self, identity: RequestIdentity, state: StreamState, taken: list[UnindexedRange]) -> None:
        if self._ledger is not None:
            self._ledger.claimed(identity, state, taken)

    async def take(
        self,
        identity: RequestIdentity,
        planner: Planner,
        counter: TokenCounter,
        deadline: float | None,
        *,
        count_known: bool,
        pack: Packer | None,
    ) -> tuple[PendingWrite | None, ClaimPlan | None, StreamState]:
        """The claim written and its plan, or (None, None, state) when nothing is left to claim.
        Raises `Aborted` when the stream stays busy past the call's time."""
        give_up = time.monotonic() + MAX_CLAIM_WAIT_SECONDS
        if deadline is not None:
            give_up = min(give_up, deadline - 0.5)
        read_back: PendingWrite | None = None
        # Right behind the stream's previous turn its append may still run here: once it lands,
        # its release is owed and folds into this claim's one write. Claiming first could only
        # find the stream's claim held (a read, then this same wait).
        await self._after_own_append(identity, give_up)
        while True:
            now = self._clock()
            made: list[tuple[PendingWrite, ClaimPlan]] = []
            taken: list[UnindexedRange] = []
            claim = claimer(
                planner,
                now,
                made,
                lambda current: self._releases.fold(identity, current),
                count_known=count_known,
                pack=pack,
                note=None if self._ledger is None else self._ledger.noter(identity, now, taken),
            )
            async with self._releases.claiming(identity):
                try:
                    state, written = await self._states.update(identity, claim, deadline=deadline)
                except Aborted:  # contended: other writers won every round; a claim may wait longer
                    if time.monotonic() >= give_up:
                        raise
                    await asyncio.sleep(CLAIM_POLL_SECONDS)
                    continue
                self._releases.observe(identity, state)
            if written and made:
                self._claimed(identity, state, taken)
                pending, plan = made[0]
                return pending, plan, state
            if written:
                return None, None, state  # only the release owed was written: nothing left to claim
            if state.pending_write is None:
                return None, None, state  # nothing left to claim: all of it is someone else's
            if is_stale(state.pending_write, now):
                await self._repair.repair(identity, state.pending_write, counter, deadline=deadline)
                continue
            held = state.pending_write
            if held.outbox is not None and planner(state) is None:
                return None, None, state  # all of it is in a claim with an outbox: it is completed
            if held != read_back and worth_reading_back(held, now):
                read_back = held  # once per claim version: a live owner refreshes it
                if await self._repair.settle_landed(identity, held, counter, deadline):
                    continue
            if time.monotonic() >= give_up:
                raise Aborted(f"stream {identity.buffer_key} is busy with another write; retry the call")
            await self._wait(identity, give_up)

    async def _wait(self, identity: RequestIdentity, give_up: float) -> None:
        """Until the stream's claim may be gone: the end of this replica's append on the stream
        (the host's next turn right after an answered one), else one poll interval."""
        if not await self._after_own_append(identity, give_up):
            await asyncio.sleep(CLAIM_POLL_SECONDS)

    async def _after_own_append(self, identity: RequestIdentity, give_up: float) -> bool:
        """Wait (within the call's time) for this replica's running append on the stream, if any
        (False: none runs)."""
        running = self._own_append(identity)
        if running is None:
            return False
        await asyncio.wait(
            [running], timeout=min(CLAIM_WAIT_ON_OWN_SECONDS, max(0.0, give_up - time.monotonic()))
        )
        return True
