"""Claims their owner never released: read back what landed, then release or roll back.

A claim records the positions (and how many messages) its owner appends. When the owner dies, or
its append's outcome is unknown, the stream's next caller settles the claim from what OpenViking
holds (the live session and its archives, by turn id): all of it landed -> released for the owner;
part of it -> the rest rolled back to be claimed again (see `services.capture.transcript`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from contextengine.v1 import common_pb2

from services.capture.claims import ABANDONED_AT
from services.capture.landed_claims import all_landed, landed_messages
from services.capture.releases import Release
from shared.domain.envelope import texts_of
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore
from shared.openviking.client import OpenVikingClient
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

Role = common_pb2.MessageRole


def message_counts(
    messages: Sequence[common_pb2.ConversationMessage], counter: TokenCounter
) -> tuple[int, int]:
    """(user turns, tokens) of the messages."""
    turns = sum(1 for m in messages if m.role == Role.MESSAGE_ROLE_USER)
    tokens = sum(counter.count_message(texts_of(m)) for m in messages)
    return turns, tokens


def add_counts(state: StreamState, turns: int, tokens: int) -> None:
    state.turns_since_compaction += turns
    state.tokens_since_compaction += tokens
    state.active_tokens += tokens


def landed_release(held: PendingWrite, new_last: int, turns: int, tokens: int) -> Release:
    """The release of `held`, whose messages landed through `new_last` (`turns`, `tokens` of them)."""

    def release(current: StreamState) -> bool:
        if current.pending_write != held:
            return False  # released already, or repaired by another replica that counted it
        current.pending_write = None
        current.last_sequence = new_last
        current.unsettled = [u for u in current.unsettled if u.end_sequence > new_last]
        current.record_turn_progress(held, new_last, whole=True)
        add_counts(current, turns, tokens)
        return True

    return release


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

    async def abandon(self, identity: RequestIdentity, claim: PendingWrite) -> None:
        """Best effort: mark our claim for immediate repair (what landed is unknown)."""
        abandoned = claim.model_copy(update={"claimed_at": ABANDONED_AT})

        def mark(current: StreamState) -> StreamState | None:
            if current.pending_write != claim:
                return None
            current.pending_write = abandoned
            return current

        try:
            await asyncio.shield(self._states.update(identity, mark))
        except Exception:  # the stale-claim repair covers it later
            log.warning("could not mark claim %s of %s for repair", claim, identity.buffer_key, exc_info=True)

    async def repair(
        self,
        identity: RequestIdentity,
        stale: PendingWrite,
        counter: TokenCounter,
        *,
        deadline: float | None = None,
    ) -> None:
        """Take over a stale claim, keep what landed (live or archived), roll back past the rest."""
        takeover = stale.model_copy(update={"claimed_at": self._clock()})

        def take(current: StreamState) -> StreamState | None:
            if current.pending_write != stale:
                return None
            current.pending_write = takeover
            return current

        _, won = await self._states.update(identity, take, deadline=deadline)
        if not won:
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
