"""Claims their owner never released: read back what landed, then release, complete or roll back.

A claim records the positions (and how many messages) its owner appends. When the owner dies, or
its append's outcome is unknown, the stream's next caller settles the claim from what OpenViking
holds (the live session and its archives, by turn id): all of it landed -> released for the owner;
part of it -> a claim with an outbox (`services.capture.outbox`) is completed (the rest appended
from the outbox, then released), any other has the rest rolled back to be claimed again (see
`services.capture.transcript`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from services.capture.claim_counts import add_counts, landed_release, message_counts
from services.capture.claims import APPEND_TIMEOUT_SECONDS, ClaimHolder, abandoned
from services.capture.landed_claims import all_landed, landed_messages
from services.capture.outbox import unsent
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import Outbox, PendingWrite, StreamState, StreamStateStore
from shared.openviking.client import OpenVikingClient
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)


class ClaimRepair:
    """Settles or rolls back claims of one stream state store (any replica may do it)."""

    def __init__(
        self, openviking: OpenVikingClient, states: StreamStateStore, clock: Callable[[], datetime]
    ) -> None:
        self._ov = openviking
        self._states = states
        self._clock = clock

    async def settle_landed(
        self, identity: RequestIdentity, claim: PendingWrite, counter: TokenCounter, deadline: float | None
    ) -> bool:
        """Release `claim` for an owner that never did, if all its messages landed (it is done)."""
        landed = await landed_messages(self._ov, identity.tenant, claim, deadline=deadline)
        if not all_landed(claim, landed):
            return False
        release = landed_release(claim, claim.end_sequence, *message_counts(list(landed.values()), counter))
        _, written = await self._states.update(
            identity, lambda current: current if release(current) else None, deadline=deadline
        )
        if written:
            log.warning("settled the landed claim %d..%d of %s for its owner", claim.start_sequence,
                        claim.end_sequence, identity.buffer_key)  # fmt: skip
        return True

    async def abandon(self, identity: RequestIdentity, claim: PendingWrite) -> PendingWrite | None:
        """Best effort: mark our claim for repair (what landed is unknown, `claims.abandoned`);
        the claim as marked, or None when it was not (no longer ours, or not written)."""
        given_up = abandoned(claim, self._clock())

        def mark(current: StreamState) -> StreamState | None:
            if current.pending_write != claim:
                return None
            current.pending_write = given_up
            return current

        try:
            _, marked = await asyncio.shield(self._states.update(identity, mark))
        except Exception:  # the stale-claim repair covers it later
            log.warning("could not mark claim %s of %s for repair", claim.start_sequence, identity.buffer_key,
                        exc_info=True)  # fmt: skip
            return None
        return given_up if marked else None

    async def repair(
        self,
        identity: RequestIdentity,
        stale: PendingWrite,
        counter: TokenCounter,
        *,
        deadline: float | None = None,
    ) -> None:
        """Take over a stale claim: complete it from its outbox, or keep what landed (live or
        archived) and roll back past the rest."""
        takeover = stale.model_copy(update={"claimed_at": self._clock()})

        def take(current: StreamState) -> StreamState | None:
            if current.pending_write != stale:
                return None
            current.pending_write = takeover
            return current

        taken, won = await self._states.update(identity, take, deadline=deadline)
        if not won:
            return
        if stale.outbox is not None:
            await self._complete(
                identity,
                stale,
                stale.outbox,
                takeover,
                target=_completion_session(taken, stale),
                deadline=deadline,
            )
            return
        landed = await landed_messages(self._ov, identity.tenant, stale, deadline=deadline)
        turns, tokens = message_counts(list(landed.values()), counter)
        new_last = max(landed) if landed else stale.start_sequence - 1
        whole = len(landed) == stale.end_sequence - stale.start_sequence + 1
        log.warning(
            "repaired claim %d..%d of %s: %d landed, last_sequence -> %d",
            stale.start_sequence,
            stale.end_sequence,
            identity.buffer_key,
            len(landed),
            new_last,
        )
        rolled_back = []
        if new_last < stale.end_sequence:
            rolled_back.append(stale.model_copy(update={"start_sequence": new_last + 1}))

        def finish(current: StreamState) -> StreamState | None:
            if current.pending_write != takeover:
                return None
            current.pending_write = None
            current.last_sequence = new_last
            current.unsettled = [*current.unsettled, *rolled_back]
            current.record_turn_progress(stale, new_last, whole=whole)
            add_counts(current, turns, tokens)
            return current

        await self._states.update(identity, finish, deadline=deadline)

    async def _complete(
        self,
        identity: RequestIdentity,
        stale: PendingWrite,
        outbox: Outbox,
        takeover: PendingWrite,
        *,
        target: str,
        deadline: float | None,
    ) -> None:
        """Append what of the taken-over claim's outbox has not landed to `target`, then
        release it whole."""
        landed: set[int] = set()
        for session_id in dict.fromkeys((stale.session_id, target)):
            found = await landed_messages(self._ov, identity.tenant, stale, session_id, deadline=deadline)
            landed |= set(found)
        missing = unsent(stale, landed)
        held = takeover
        if missing:
            async with ClaimHolder(self._states, identity, takeover, self._clock) as holder:
                try:
                    await holder.while_fresh(
                        self._ov.add_messages(
                            identity.tenant, target, missing, call_timeout=APPEND_TIMEOUT_SECONDS
                        )
                    )
                except BaseException:
                    await holder.__aexit__()
                    await self.abandon(identity, holder.claim)
                    raise
            held = holder.claim
        release = landed_release(held, stale.end_sequence, outbox.turns, outbox.tokens)
        _, written = await self._states.update(
            identity, lambda current: current if release(current) else None, deadline=deadline
        )
        log.warning(
            "completed claim %d..%d of %s from its outbox: %d of %d appended%s",
            stale.start_sequence,
            stale.end_sequence,
            identity.buffer_key,
            len(missing),
            len(outbox.messages),
            "" if written else " (released by another replica meanwhile)",
        )


def _completion_session(state: StreamState, claim: PendingWrite) -> str:
    """Where the missing part of a claim's outbox goes: the claim's own session while it is
    active or its compaction has not committed it - the compaction worker commits a session
    only once no claim with an outbox is left on it (`services.capture.acknowledged`), so the
    turns are archived with the ones they came with; else (a session committed without them by
    an engine that did not wait) the active session: they are compacted with the turns after."""
    if claim.session_id == state.active_session or any(
        entry.session_id == claim.session_id for entry in state.inflight
    ):
        return claim.session_id
    return state.active_session
