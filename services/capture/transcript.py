"""Lossless, exactly-once appends of host messages to a stream's active OpenViking session.

Any replica may serve any call, so the stream state document is the only coordinator:

1. claim: one compare-and-swap sets `last_sequence` to the new maximum and `pending_write` to
   the claimed range *before* anything is appended. A claim exists at most once per stream, so
   appends are serialised and stay in transcript order; a second caller waits for it to clear
   and then only sees what is still unclaimed (those messages are duplicates to it). A claim
   whose compare-and-swap keeps losing to other writers waits the same way, within the call's
   time, rather than failing after one state update's attempts;
2. append the claimed messages (`add_messages`) to the claim's session (`claim_append`);
3. release: clear the claim and add the counters the triggers need. The release is written
   after the caller's answer (`services.capture.releases`), folded into this replica's next
   claim of the stream or alone a moment later. Only a release that hands a compaction off (a
   trigger fired) is written before the caller is answered, in the same compare-and-swap as the
   hand-off.

A claim that one append can store also carries its messages' OpenViking bodies, its outbox
(`services.capture.outbox`): the turn is durable once the claim is, so its caller is answered
right after the claim and a steady turn waits for one OpenViking round trip (issue 16). Such a
claim is completed, never rolled back. Other claims (Ingest, very long turns, positions an
earlier repair left unsettled) are answered after the append: two round trips. Steps 2-3 run in
a task this replica owns, not in the caller's call: the caller's deadline or cancellation never
cuts an append short. The owner refreshes the claim every `CLAIM_HEARTBEAT_SECONDS` while it
waits for OpenViking's answer (up to `APPEND_TIMEOUT_SECONDS`), so a slow append is never
mistaken for a dead one and never written again while it may still land.

A claim left behind (crashed replica, or an append whose outcome is unknown) is repaired once
it is older than `STALE_CLAIM_SECONDS`, or at once when its owner marked it abandoned: the
repairer takes the claim over and reads the session - its archives too, since a compaction may
have committed it meanwhile. A claim with an outbox is completed (`LATE_LANDING_GRACE_SECONDS`
after its owner gave up, so that an append whose answer was lost has landed): what of the
outbox did not land is appended, and the claim released with the outbox's counts (the owner of a failed
append does this itself a moment later, so that a stream nobody calls again is completed too).
Any other claim keeps what landed (counting it) and rolls `last_sequence` back to the last
landed message so that the rest is claimed again from the host's next delivery (the host always
sends the whole transcript). The rolled-back range stays `unsettled`: the next write of those
positions first looks up their turn ids in that session, so an append that lands after the
repair read is recognised instead of appended a second time. A claim that says how many
messages it appends and is not released `SETTLE_AFTER_SECONDS` after it was taken is read back
sooner (`services.capture.landed_claims`): when all of it landed, its owner died owing the
release, and the caller writes that release for it instead of waiting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from services.capture.acknowledged import AcknowledgedTurns
from services.capture.claim_append import ClaimAppend
from services.capture.claim_counts import landed_release, message_counts
from services.capture.claim_repair import ClaimRepair
from services.capture.claim_taking import ClaimTaker
from services.capture.claims import (
    APPEND_TIMEOUT_SECONDS,
    LATE_LANDING_GRACE_SECONDS,
    Candidate,
    ClaimPlan,
    Planner,
)
from services.capture.index_ledger import IndexLedger
from services.capture.outbox import packer
from services.capture.outbox_sweep import OutboxSweep
from services.capture.releases import OwedReleases, StreamKey, stream_key
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import Outbox, PendingWrite, StreamState, StreamStateStore, utc_now
from shared.openviking.client import OpenVikingClient
from shared.runtime.answer_first import after_answer
from shared.tokens import TokenCounter

__all__ = ["Candidate", "ClaimPlan", "Planner", "ReleaseHook", "TranscriptWriter", "WriteResult"]
"""The writer's API (claim plans come from `services.capture.claims`)."""

log = logging.getLogger(__name__)
T = TypeVar("T")

OUTBOX_RETRY_SECONDS = LATE_LANDING_GRACE_SECONDS + 0.5
"""How long after its failed append the owner of an answered claim completes it from its outbox
(unless the stream's next call did it first)."""


ReleaseHook = Callable[[StreamState], bool]
"""Called with the released state; may change it further (e.g. hand a compaction off) and then
returns True: the release and that change are written together, before the caller is answered."""


@dataclass
class WriteResult:
    state: StreamState
    session_id: str
    persisted: list[Candidate] = field(default_factory=list)
    claimed_start: int = 0
    """First position this call claimed; with `claimed_end`, empty when start > end."""
    claimed_end: int = -1
    host_id_duplicates: int = 0
    """Messages skipped because their host id was already in the session (Ingest)."""
    released: StreamState | None = None
    """The state right after this call's release, before `on_release` changed it (None when the
    claim was released by another replica's repair meanwhile, or nothing was claimed)."""


def _written(
    held: PendingWrite,
    plan: ClaimPlan,
    claimed_state: StreamState,
    *,
    kept: list[Candidate],
    new_last: int,
    counts: tuple[int, int],
) -> WriteResult:
    """The result of a write whose messages `kept` landed through `new_last`: the state as its
    release leaves it (`counts`: the user turns and tokens the release adds)."""
    released = claimed_state.model_copy(deep=True)
    released.pending_write = held
    landed_release(held, new_last, *counts)(released)
    return WriteResult(
        state=released,
        session_id=held.session_id,
        persisted=kept,
        claimed_start=plan.start,
        claimed_end=plan.end,
        released=released.model_copy(deep=True),
    )


class TranscriptWriter:
    def __init__(
        self,
        openviking: OpenVikingClient,
        states: StreamStateStore,
        *,
        clock: Callable[[], datetime] = utc_now,
        append_timeout: float = APPEND_TIMEOUT_SECONDS,
        releases: OwedReleases | None = None,
        ledger: IndexLedger | None = None,
    ) -> None:
        self._states = states
        self._releases = releases or OwedReleases(states)
        self._repair = ClaimRepair(openviking, states, clock)
        self._append = ClaimAppend(openviking, states, self._repair, clock, append_timeout)
        self.sweep = OutboxSweep(
            states, self._repair.repair, clock, recover_index=None if ledger is None else ledger.recover_quiet
        )
        self.acknowledged = AcknowledgedTurns(states, self._repair, clock, own_append=self.settle)
        self._jobs: set[asyncio.Task[Any]] = set()
        self._appending: dict[StreamKey, asyncio.Task[Any]] = {}
        self._claims = ClaimTaker(
            states,
            self._releases,
            self._repair,
            lambda who: self._appending.get(stream_key(who)),
            clock,
            ledger=ledger,
        )

    @property
    def running(self) -> int:
        """Appends this replica still owns (they finish even when their caller went away)."""
        return len(self._jobs)

    async def drain(self) -> None:
        """Wait until every append this replica owns has finished and been released (bound it
        with a timeout)."""
        while self._jobs:
            await asyncio.gather(*list(self._jobs), return_exceptions=True)
        await self._releases.drain()
        await self.sweep.close()

    async def appended(self, identity: RequestIdentity) -> None:
        """Wait for this replica's append on the stream (if one runs) to finish."""
        running = self._appending.get(stream_key(identity))
        if running is not None:
            await asyncio.wait([running])

    async def settle(self, identity: RequestIdentity) -> None:
        """Finish this replica's append on the stream and write the release it owes now (its
        counters become visible)."""
        await self.appended(identity)
        await self._releases.settle(identity)

    async def write(
        self,
        identity: RequestIdentity,
        planner: Planner,
        counter: TokenCounter,
        *,
        dedupe_host_ids: bool = False,
        on_release: ReleaseHook | None = None,
        deadline: float | None = None,
    ) -> WriteResult:
        """Claim with `planner`, append, release. Raises `Aborted` if the stream stays busy.

        A claim with an outbox is answered as soon as it is stored, unless `on_release` changes
        its release (a trigger fired: the hand-off is written before the answer); otherwise the
        caller waits for the append. Once claimed, the append and the release run to the end in
        a task of this replica whatever happens to the caller (deadline, cancellation).
        """
        self.sweep.served(identity, counter)
        claim, plan, state = await self._claims.take(
            identity,
            planner,
            counter,
            deadline,
            count_known=not dedupe_host_ids,
            pack=None if dedupe_host_ids else packer(identity, counter),
        )
        if claim is None or plan is None:
            return WriteResult(state=state, session_id=state.active_session)
        outbox = claim.outbox
        if outbox is not None:
            kept = [c for c in plan.candidates if c.message is not None]
            answer = _written(
                claim, plan, state, kept=kept, new_last=plan.end, counts=(outbox.turns, outbox.tokens)
            )
            if on_release is None or not on_release(answer.state.model_copy(deep=True)):
                self._own(
                    identity, self._send_outbox(identity, claim, outbox, plan, state, counter=counter), plan
                )
                return answer
        job = self._own(
            identity,
            self._append_and_release(
                identity,
                claim,
                plan,
                state,
                counter=counter,
                dedupe_host_ids=dedupe_host_ids,
                on_release=on_release,
            ),
            plan,
        )
        return await asyncio.shield(job)

    def _own(
        self, identity: RequestIdentity, work: Coroutine[None, None, T], plan: ClaimPlan
    ) -> asyncio.Task[T]:
        """Run `work` (an append and its release) in a task of this replica."""
        job = asyncio.create_task(work, name=f"append-{identity.buffer_key}-{plan.start}")
        key = stream_key(identity)
        self._jobs.add(job)
        self._appending[key] = job
        job.add_done_callback(lambda done: self._finished(done, key))
        return job

    def _finished(self, job: asyncio.Task[Any], key: StreamKey) -> None:
        """Forget a finished append; its error was the caller's (if it still waited) and is
        covered by the claim repair, so it is retrieved here rather than reported as lost."""
        self._jobs.discard(job)
        if self._appending.get(key) is job:
            del self._appending[key]
        if not job.cancelled():
            job.exception()

    async def _send_outbox(
        self,
        identity: RequestIdentity,
        claim: PendingWrite,
        outbox: Outbox,
        plan: ClaimPlan,
        claimed_state: StreamState,
        *,
        counter: TokenCounter,
    ) -> None:
        """Append an answered claim's outbox and owe its release; if the append fails, look at
        the claim again once it may be completed (`OutboxSweep.look_now`: what landed is read
        back first), or leave it to the stream's next call. It starts once the caller has its
        answer (`after_answer`): the claim already holds the messages."""
        await after_answer()
        try:
            appended = await self._append(identity, claim, plan, claimed_state, dedupe_host_ids=False)
        except Exception:
            log.warning("append of the answered claim %d..%d of %s failed; completing it from its outbox",
                        plan.start, plan.end, identity.buffer_key, exc_info=True)  # fmt: skip
            await asyncio.sleep(OUTBOX_RETRY_SECONDS)
            try:
                await self.sweep.look_now(identity, counter)
            except Exception:  # the stream's next call or the outbox sweep completes it
                log.warning("could not complete the claim %d..%d of %s yet", plan.start, plan.end,
                            identity.buffer_key, exc_info=True)  # fmt: skip
            return
        held = appended.held
        self._releases.owe(identity, held, landed_release(held, plan.end, outbox.turns, outbox.tokens))

    async def _append_and_release(
        self,
        identity: RequestIdentity,
        claim: PendingWrite,
        plan: ClaimPlan,
        claimed_state: StreamState,
        *,
        counter: TokenCounter,
        dedupe_host_ids: bool,
        on_release: ReleaseHook | None,
    ) -> WriteResult:
        appended = await self._append(identity, claim, plan, claimed_state, dedupe_host_ids=dedupe_host_ids)
        held, kept, new_last = appended.held, appended.kept, appended.new_last
        counts = (
            (claim.outbox.turns, claim.outbox.tokens)
            if claim.outbox is not None
            else message_counts([c.message for c in kept if c.message is not None], counter)
        )
        result = _written(held, plan, claimed_state, kept=kept, new_last=new_last, counts=counts)
        result.host_id_duplicates = appended.duplicates
        release = landed_release(held, new_last, *counts)
        if on_release is None or not on_release(result.state.model_copy(deep=True)):
            self._releases.owe(identity, held, release)
            return result
        released: list[StreamState] = []

        def release_with_hook(current: StreamState) -> StreamState | None:
            released.clear()
            if not release(current):
                return None
            released.append(current.model_copy(deep=True))
            on_release(current)
            return current

        try:
            result.state, _ = await self._states.update(identity, release_with_hook)
        except BaseException:
            await self._repair.abandon(identity, held)
            raise
        result.released = released[0] if released else None
        return result
