"""Outbox claims: a turn's messages stored with its claim, so the caller is answered once the
claim is stored and the append follows off its path (issue 16: one round trip per steady turn).

A claim's compare-and-swap is already the point where a turn becomes the stream's, exactly
once; storing the turn's OpenViking message bodies in it makes that point durable too. From
then on the claim is *completed*, never rolled back: its owner appends the outbox and releases
the claim; if the owner dies or its append fails, whoever repairs the claim appends what of the
outbox is not in the session yet and releases it with the counts the outbox carries
(`services.capture.claim_repair`).

Only a claim that one append can store, whose positions no earlier repair left unsettled, and
whose messages fit `OUTBOX_MAX_BYTES` gets an outbox; others (Ingest, which drops host ids it
finds in the session first, very long turns) keep the claim -> append -> answer path.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.capture.claim_counts import message_counts
from services.capture.claims import ClaimPlan, Packer, unsettled_under
from shared.domain.envelope import openviking_message
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import Outbox, OutboxMessage, PendingWrite, StreamState
from shared.openviking.models.parts import NewMessage
from shared.tokens import TokenCounter

OUTBOX_MAX_MESSAGES = 100
"""One OpenViking append (`messages/batch` takes up to 100 messages)."""
OUTBOX_MAX_BYTES = 256_000
"""Largest turn (serialised host messages) stored in the stream state document with its claim."""


def packer(identity: RequestIdentity, counter: TokenCounter) -> Packer:
    """Builds a plan's outbox (once per planned range, however often the compare-and-swap runs)."""
    packed: dict[tuple[int, int], Outbox | None] = {}

    def pack(state: StreamState, plan: ClaimPlan) -> Outbox | None:
        if unsettled_under(state, plan):
            return None
        key = (plan.start, plan.end)
        if key not in packed:
            packed[key] = _outbox(identity, plan, counter)
        return packed[key]

    return pack


def _outbox(identity: RequestIdentity, plan: ClaimPlan, counter: TokenCounter) -> Outbox | None:
    kept = [(c, c.message) for c in plan.candidates if c.message is not None]
    if len(kept) > OUTBOX_MAX_MESSAGES or sum(m.ByteSize() for _, m in kept) > OUTBOX_MAX_BYTES:
        return None
    turns, tokens = message_counts([m for _, m in kept], counter)
    return Outbox(
        messages=[
            OutboxMessage(
                sequence=c.sequence,
                body=openviking_message(identity.stream_id, c.sequence, m, c.used_context_uris, c.provenance),
            )
            for c, m in kept
        ],
        turns=turns,
        tokens=tokens,
    )


def unsent(claim: PendingWrite, landed: Sequence[int] | set[int]) -> list[NewMessage]:
    """The outbox messages of `claim` whose positions are not among `landed`."""
    outbox = claim.outbox
    if outbox is None:
        return []
    found = set(landed)
    return [m.body for m in outbox.messages if m.sequence not in found]
