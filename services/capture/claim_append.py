"""A claim's append: what it stores (its outbox, or the messages it plans) in its session, with
the claim kept fresh while OpenViking answers (`ClaimHolder`), less what an earlier, repaired
append stored after all (`unsettled` positions are looked up first). On failure the claim is
marked abandoned for the repair (`services.capture.claim_repair`) and the error raised; the
caller (`services.capture.transcript`) owns the task it runs in and the release after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from services.capture.claim_repair import ClaimRepair
from services.capture.claims import Candidate, ClaimHolder, ClaimPlan, unsettled_under
from services.capture.host_ids import drop_known_host_ids
from services.capture.outbox import unsent
from services.compaction.transcript import session_turns
from shared.domain.envelope import openviking_message
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Appended:
    """What an append stored: through `new_last`, `kept` (less `duplicates` found by host id)."""

    held: PendingWrite
    """The claim as stored when the append ended (its owner refreshes it meanwhile)."""
    kept: list[Candidate]
    new_last: int
    duplicates: int


class ClaimAppend:
    def __init__(
        self,
        openviking: OpenVikingClient,
        states: StreamStateStore,
        repair: ClaimRepair,
        clock: Callable[[], datetime],
        append_timeout: float,
    ) -> None:
        self._ov = openviking
        self._states = states
        self._repair = repair
        self._clock = clock
        self._append_timeout = append_timeout

    async def __call__(
        self,
        identity: RequestIdentity,
        claim: PendingWrite,
        plan: ClaimPlan,
        claimed_state: StreamState,
        *,
        dedupe_host_ids: bool,
    ) -> Appended:
        """Append what the claim stores (its outbox) or plans, keeping the claim fresh meanwhile;
        on failure the claim is marked for repair and the error raised."""
        async with ClaimHolder(self._states, identity, claim, self._clock) as holder:
            kept = [c for c in plan.candidates if c.message is not None]
            duplicates = 0
            new_last = plan.end
            try:
                if dedupe_host_ids:
                    kept, duplicates = await drop_known_host_ids(
                        self._ov, identity.tenant, claim.session_id, kept
                    )
                    # Renumber: positions are only stable for AfterTurn; Ingest continues the stream.
                    kept = [replace(c, sequence=plan.start + i) for i, c in enumerate(kept)]
                    new_last = plan.start + len(kept) - 1
                landed = await self._landed_late(identity.tenant, claimed_state, plan)
                to_append = [c for c in kept if c.sequence not in landed]
                if to_append:
                    await holder.while_fresh(
                        self._ov.add_messages(
                            identity.tenant,
                            claim.session_id,
                            unsent(claim, landed)
                            if claim.outbox is not None
                            else [
                                openviking_message(
                                    identity.stream_id,
                                    c.sequence,
                                    c.message,
                                    c.used_context_uris,
                                    c.provenance,
                                )
                                for c in to_append
                                if c.message is not None
                            ],
                            call_timeout=self._append_timeout,
                        )
                    )
            except BaseException:
                await holder.__aexit__()
                await self._repair.abandon(identity, holder.claim)
                raise
        if landed:
            log.warning(
                "%d message(s) of %s landed late from an earlier append; not appended again",
                len(landed),
                identity.buffer_key,
            )
        return Appended(holder.claim, kept, new_last, duplicates)

    async def _landed_late(self, tenant: Tenant, state: StreamState, plan: ClaimPlan) -> set[int]:
        """Positions of the plan that an earlier, repaired append stored after all."""
        overlapping = unsettled_under(state, plan)
        found: set[int] = set()
        for session_id in dict.fromkeys(u.session_id for u in overlapping):
            for turn in await session_turns(self._ov, tenant, session_id):
                if plan.start <= turn.sequence <= plan.end:
                    found.add(turn.sequence)
        return found
