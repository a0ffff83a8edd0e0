"""Claims on a stream's transcript positions (the coordination of `services.capture.transcript`):
what a claim covers, when it is stale, the compare-and-swap that takes one, and keeping a held
claim fresh while its owner's append runs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from contextengine.v1 import common_pb2

from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import Outbox, PendingWrite, StreamState, StreamStateStore
from shared.errors import BackendTimeout

log = logging.getLogger(__name__)

STALE_CLAIM_SECONDS = 30.0
"""A claim not refreshed for this long belongs to a replica that died; it is repaired."""
CLAIM_HEARTBEAT_SECONDS = 5.0
"""How often the owner of a claim refreshes it while its append runs."""
APPEND_TIMEOUT_SECONDS = 120.0
"""How long an append waits for OpenViking's answer (an unanswered append has an unknown outcome)."""
ABANDONED_AT = datetime(1970, 1, 1, tzinfo=UTC)
"""`claimed_at` of a claim its owner gave up on (repair it right away)."""
LATE_LANDING_GRACE_SECONDS = 5.0
"""A claim with an outbox whose owner gave up on its append is completed no sooner than this
after: an append whose answer was lost lands meanwhile, and the completion's read finds it
instead of appending it again (a claim without one is rolled back at once: its rest is only
appended again after the next write looks it up, `StreamState.unsettled`)."""


def abandoned(claim: PendingWrite, now: datetime) -> PendingWrite:
    """`claim` as its owner leaves it when giving up on its append: due for repair at once, or
    after `LATE_LANDING_GRACE_SECONDS` when the repair completes its outbox."""
    if claim.outbox is None:
        return claim.model_copy(update={"claimed_at": ABANDONED_AT})
    due = now - timedelta(seconds=STALE_CLAIM_SECONDS - LATE_LANDING_GRACE_SECONDS)
    return claim.model_copy(update={"claimed_at": due})


@dataclass(frozen=True)
class Candidate:
    """A host message to persist at a transcript position (None: injected, nothing to store)."""

    sequence: int
    message: common_pb2.ConversationMessage | None
    used_context_uris: tuple[str, ...] = ()
    provenance: str = ""
    """The fenced turn the message belongs to (`envelope.turn_provenance`), empty outside one."""


@dataclass(frozen=True)
class ClaimPlan:
    start: int
    end: int
    candidates: list[Candidate]
    turn_key: str = ""
    """Digest of the fenced turn's advancement key: recorded as committed when all of it landed."""


Planner = Callable[[StreamState], ClaimPlan | None]
"""Given the current state, the range to claim (None: nothing left to claim)."""
Packer = Callable[[StreamState, ClaimPlan], Outbox | None]
"""Inside the claim's compare-and-swap: the plan's outbox, or None (a claim without one)."""
Noter = Callable[[StreamState, PendingWrite], None]
"""Inside the claim's compare-and-swap, once the claim is made: records more in the same write
(the turn index's ledger, `services.capture.index_ledger`)."""


def unsettled_under(state: StreamState, plan: ClaimPlan) -> list[PendingWrite]:
    """The ranges an earlier repair left unsettled that overlap the plan's positions."""
    return [u for u in state.unsettled if u.start_sequence <= plan.end and plan.start <= u.end_sequence]


def is_stale(claim: PendingWrite, now: datetime) -> bool:
    return now - claim.claimed_at >= timedelta(seconds=STALE_CLAIM_SECONDS)


def claimer(
    planner: Planner,
    now: datetime,
    made: list[tuple[PendingWrite, ClaimPlan]],
    fold: Callable[[StreamState], bool],
    *,
    count_known: bool = True,
    pack: Packer | None = None,
    note: Noter | None = None,
) -> Callable[[StreamState], StreamState | None]:
    """The CAS mutation that claims the next range (recording it in `made`) unless one is held.

    `fold` first applies a release this replica owes on the stream (its landed claim is then no
    longer held): releasing it and claiming the next range take one write. With `count_known`
    the claim records how many messages it appends (`PendingWrite.expected`); `pack` gives it
    its outbox (`services.capture.outbox`); `note` adds to the same write once a claim is made.
    """

    def claim(current: StreamState) -> StreamState | None:
        made.clear()
        folded = fold(current)
        if current.pending_write is not None:
            return None
        plan = planner(current)
        if plan is None or plan.start > plan.end:
            return current if folded else None
        pending = PendingWrite(
            start_sequence=plan.start,
            end_sequence=plan.end,
            session_id=current.active_session,
            claimed_at=now,
            turn_key=plan.turn_key,
            expected=sum(1 for c in plan.candidates if c.message is not None) if count_known else -1,
            outbox=pack(current, plan) if pack is not None else None,
        )
        current.pending_write = pending
        current.last_sequence = plan.end
        if note is not None:
            note(current, pending)
        made.append((pending, plan))
        return current

    return claim


T = TypeVar("T")

KEPT_FRESH_SECONDS = STALE_CLAIM_SECONDS - LATE_LANDING_GRACE_SECONDS
"""How long after its last stored refresh a holder still works on its claim (`while_fresh`)."""


class ClaimHolder:
    """Keeps a claim fresh while its owner works; `claim` is always the version stored.

    A holder whose refreshes do not reach OpenViking (an outage) must stop working before its
    claim can be taken over as stale: `while_fresh` cancels the work - an append the transport
    keeps retrying - `KEPT_FRESH_SECONDS` after the last refresh stored, which leaves a request
    already sent `LATE_LANDING_GRACE_SECONDS` to land before a repairer reads what did.
    """

    def __init__(
        self,
        states: StreamStateStore,
        identity: RequestIdentity,
        claim: PendingWrite,
        clock: Callable[[], datetime],
    ) -> None:
        self._states = states
        self._identity = identity
        self._clock = clock
        self.claim = claim
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._fresh_until = time.monotonic() + KEPT_FRESH_SECONDS
        self._taken_over = asyncio.Event()

    async def __aenter__(self) -> ClaimHolder:
        self._task = asyncio.create_task(self._beat(), name=f"claim-heartbeat-{self._identity.buffer_key}")
        return self

    async def __aexit__(self, *_: object) -> None:
        """Stop refreshing; waits for a refresh in flight so that `claim` is what is stored."""
        self._stop.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def while_fresh(self, work: Awaitable[T]) -> T:
        """`work`'s result; cancelled (BackendTimeout) once the claim may be taken over."""
        task = asyncio.ensure_future(work)
        taken_over = asyncio.ensure_future(self._taken_over.wait())
        try:
            while not self._taken_over.is_set() and (left := self._fresh_until - time.monotonic()) > 0:
                await asyncio.wait([task, taken_over], timeout=left, return_when=asyncio.FIRST_COMPLETED)
                if task.done():
                    return task.result()
        finally:  # given up, or the caller cancelled: the work never outlives this call
            taken_over.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        raise BackendTimeout(
            f"the claim of {self._identity.buffer_key} was not kept fresh; its append given up"
        )

    async def _beat(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), CLAIM_HEARTBEAT_SECONDS)
                return
            except TimeoutError:
                pass
            try:
                if not await self._refresh():
                    self._taken_over.set()  # by a repair: `while_fresh` stops the work
                    return
            except Exception:  # the next beat tries again; a repairer may take over meanwhile
                log.warning("could not refresh claim of %s", self._identity.buffer_key, exc_info=True)

    async def _refresh(self) -> bool:
        held = self.claim
        fresher = held.model_copy(update={"claimed_at": self._clock()})

        def refresh(current: StreamState) -> StreamState | None:
            if current.pending_write != held:
                return None
            current.pending_write = fresher
            return current

        started = time.monotonic()
        _, written = await self._states.update(self._identity, refresh)
        if written:
            self.claim = fresher
            self._fresh_until = started + KEPT_FRESH_SECONDS
        return written
