"""Lossless, idempotent appends of host messages to a stream's active OpenViking session.

Any replica may serve any call, so the stream state document is the only coordinator:

1. claim: one compare-and-swap sets `last_sequence` to the new maximum and `pending_write` to
   the claimed range *before* anything is appended. A claim exists at most once per stream, so
   appends are serialised and stay in transcript order; a second caller waits for it to clear
   and then only sees what is still unclaimed (those messages are duplicates to it);
2. append the claimed messages (`add_messages`) to the claim's session;
3. release: a second compare-and-swap clears the claim and adds the counters the triggers need.

A claim left behind (crashed replica, failed append, failed release) is repaired once it is
older than `STALE_CLAIM_SECONDS`, or at once when its owner marked it abandoned: the repairer
takes the claim over, reads the session, keeps what landed (counting it) and rolls
`last_sequence` back to the last landed message so that the rest is claimed again from the
host's next delivery (the host always sends the whole transcript). Nothing is skipped and
nothing is appended twice, whichever step fails.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from contextengine.v1 import common_pb2

from shared.domain.envelope import HOST_ID_PREFIX, openviking_message, persisted_turn, texts_of
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore, utc_now
from shared.errors import Aborted, BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.sessions import SessionMessage
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

STALE_CLAIM_SECONDS = 30.0
"""A claim older than this belongs to a replica that died or hung; it is repaired."""
ABANDONED_AT = datetime(1970, 1, 1, tzinfo=UTC)
"""`claimed_at` of a claim its owner gave up on (repair it right away)."""
CLAIM_POLL_SECONDS = 0.03
MAX_CLAIM_WAIT_SECONDS = STALE_CLAIM_SECONDS + 5.0
READ_ALL_TOKEN_BUDGET = 100_000_000
"""Token budget for reading every live message of a session."""

Role = common_pb2.MessageRole


@dataclass(frozen=True)
class Candidate:
    """A host message to persist at a transcript position (None: injected, nothing to store)."""

    sequence: int
    message: common_pb2.ConversationMessage | None
    used_context_uris: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimPlan:
    start: int
    end: int
    candidates: list[Candidate]


Planner = Callable[[StreamState], ClaimPlan | None]
"""Given the current state, the range to claim (None: nothing left to claim)."""


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


def _is_stale(claim: PendingWrite, now: datetime) -> bool:
    return now - claim.claimed_at >= timedelta(seconds=STALE_CLAIM_SECONDS)


def _counts(messages: Sequence[common_pb2.ConversationMessage], counter: TokenCounter) -> tuple[int, int]:
    """(user turns, tokens) of the messages."""
    turns = sum(1 for m in messages if m.role == Role.MESSAGE_ROLE_USER)
    tokens = sum(counter.count_message(texts_of(m)) for m in messages)
    return turns, tokens


def _add_counts(state: StreamState, turns: int, tokens: int) -> None:
    state.turns_since_compaction += turns
    state.tokens_since_compaction += tokens
    state.active_tokens += tokens


def _claimer(
    planner: Planner, now: datetime, made: list[tuple[PendingWrite, ClaimPlan]]
) -> Callable[[StreamState], StreamState | None]:
    """The CAS mutation that claims the next range (recording it in `made`) unless one is held."""

    def claim(current: StreamState) -> StreamState | None:
        made.clear()
        if current.pending_write is not None:
            return None
        plan = planner(current)
        if plan is None or plan.start > plan.end:
            return None
        pending = PendingWrite(
            start_sequence=plan.start,
            end_sequence=plan.end,
            session_id=current.active_session,
            claimed_at=now,
        )
        current.pending_write = pending
        current.last_sequence = plan.end
        made.append((pending, plan))
        return current

    return claim


class TranscriptWriter:
    def __init__(
        self,
        openviking: OpenVikingClient,
        states: StreamStateStore,
        *,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._ov = openviking
        self._states = states
        self._clock = clock

    async def write(
        self,
        identity: RequestIdentity,
        planner: Planner,
        counter: TokenCounter,
        *,
        dedupe_host_ids: bool = False,
        deadline: float | None = None,
    ) -> WriteResult:
        """Claim with `planner`, append, release. Raises `Aborted` if the stream stays busy."""
        claim, plan, state = await self._claim(identity, planner, counter, deadline)
        if claim is None or plan is None:
            return WriteResult(state=state, session_id=state.active_session)
        kept = [c for c in plan.candidates if c.message is not None]
        duplicates = 0
        new_last = plan.end
        if dedupe_host_ids:
            kept, duplicates = await self._drop_known_host_ids(
                identity.tenant, claim.session_id, kept, deadline
            )
            # Renumber: positions are only stable for AfterTurn; Ingest continues the stream.
            kept = [replace(c, sequence=plan.start + i) for i, c in enumerate(kept)]
            new_last = plan.start + len(kept) - 1
        messages = [c.message for c in kept if c.message is not None]
        try:
            if kept:
                await self._ov.add_messages(
                    identity.tenant,
                    claim.session_id,
                    [
                        openviking_message(identity.stream_id, c.sequence, m, c.used_context_uris)
                        for c, m in zip(kept, messages, strict=True)
                    ],
                    deadline=deadline,
                )
        except BaseException:
            await self._abandon(identity, claim)
            raise
        turns, tokens = _counts(messages, counter)

        def release(current: StreamState) -> StreamState | None:
            if current.pending_write != claim:
                return None  # repaired by another replica meanwhile; it counted what landed
            current.pending_write = None
            current.last_sequence = new_last
            _add_counts(current, turns, tokens)
            return current

        try:
            state, _ = await self._states.update(identity, release, deadline=deadline)
        except BaseException:
            await self._abandon(identity, claim)
            raise
        return WriteResult(
            state=state,
            session_id=claim.session_id,
            persisted=kept,
            claimed_start=plan.start,
            claimed_end=plan.end,
            host_id_duplicates=duplicates,
        )

    async def _claim(
        self, identity: RequestIdentity, planner: Planner, counter: TokenCounter, deadline: float | None
    ) -> tuple[PendingWrite | None, ClaimPlan | None, StreamState]:
        give_up = time.monotonic() + MAX_CLAIM_WAIT_SECONDS
        if deadline is not None:
            give_up = min(give_up, deadline - 0.5)
        while True:
            now = self._clock()
            made: list[tuple[PendingWrite, ClaimPlan]] = []
            claim = _claimer(planner, now, made)
            state, written = await self._states.update(identity, claim, deadline=deadline)
            if written:
                pending, plan = made[0]
                return pending, plan, state
            if state.pending_write is None:
                return None, None, state  # nothing left to claim: all of it is someone else's
            if _is_stale(state.pending_write, now):
                await self.repair(identity, state.pending_write, counter, deadline=deadline)
                continue
            if time.monotonic() >= give_up:
                raise Aborted(f"stream {identity.buffer_key} is busy with another write; retry the call")
            await asyncio.sleep(CLAIM_POLL_SECONDS)

    async def _abandon(self, identity: RequestIdentity, claim: PendingWrite) -> None:
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
        """Take over a stale claim, keep what landed, roll back past what did not."""
        takeover = stale.model_copy(update={"claimed_at": self._clock()})

        def take(current: StreamState) -> StreamState | None:
            if current.pending_write != stale:
                return None
            current.pending_write = takeover
            return current

        _, won = await self._states.update(identity, take, deadline=deadline)
        if not won:
            return
        landed = await self._landed(identity.tenant, stale, deadline)
        turns, tokens = _counts(list(landed.values()), counter)
        new_last = max(landed) if landed else stale.start_sequence - 1
        log.warning(
            "repaired claim %d..%d of %s: %d landed, last_sequence -> %d",
            stale.start_sequence,
            stale.end_sequence,
            identity.buffer_key,
            len(landed),
            new_last,
        )

        def finish(current: StreamState) -> StreamState | None:
            if current.pending_write != takeover:
                return None
            current.pending_write = None
            current.last_sequence = new_last
            _add_counts(current, turns, tokens)
            return current

        await self._states.update(identity, finish, deadline=deadline)

    async def _landed(
        self, tenant: Tenant, claim: PendingWrite, deadline: float | None
    ) -> dict[int, common_pb2.ConversationMessage]:
        """Messages of the claimed range found in the session, by position."""
        found: dict[int, common_pb2.ConversationMessage] = {}
        for stored in await self.session_messages(tenant, claim.session_id, deadline):
            turn = persisted_turn(stored)
            if turn and claim.start_sequence <= turn.sequence <= claim.end_sequence:
                found[turn.sequence] = turn.message
        return found

    async def session_messages(
        self, tenant: Tenant, session_id: str, deadline: float | None
    ) -> list[SessionMessage]:
        """Every live message of a session (none when it does not exist yet)."""
        try:
            context = await self._ov.get_session_context(
                tenant, session_id, token_budget=READ_ALL_TOKEN_BUDGET, deadline=deadline
            )
        except BackendNotFound:
            return []
        return list(context.messages)

    async def _drop_known_host_ids(
        self, tenant: Tenant, session_id: str, candidates: list[Candidate], deadline: float | None
    ) -> tuple[list[Candidate], int]:
        if not any(c.message is not None and c.message.id for c in candidates):
            return candidates, 0
        known = {
            ident[len(HOST_ID_PREFIX) :]
            for stored in await self.session_messages(tenant, session_id, deadline)
            for ident in stored.source_message_ids
            if ident.startswith(HOST_ID_PREFIX) and len(ident) > len(HOST_ID_PREFIX)
        }
        kept: list[Candidate] = []
        duplicates = 0
        for candidate in candidates:
            host_id = candidate.message.id if candidate.message is not None else ""
            if host_id and host_id in known:
                duplicates += 1
                continue
            if host_id:
                known.add(host_id)
            kept.append(candidate)
        return kept, duplicates
