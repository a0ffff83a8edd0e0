"""What of a claim landed, read back from its session by turn id (archives too: a compaction may
have committed the session meanwhile).

Used by the repair of a stale claim, and to settle early a claim whose messages all landed but
whose owner never wrote the release it owed (`services.capture.releases`): a replica that died
right after its append. Such a claim is done - nothing of it can still be appended - so the next
caller releases it, counting what landed, instead of waiting `STALE_CLAIM_SECONDS` for it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from contextengine.v1 import common_pb2

from services.compaction.transcript import session_turns
from shared.domain.stream_state import PendingWrite
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

SETTLE_AFTER_SECONDS = 2.0
"""A claim not released this long after it was taken (or refreshed) is read back: its owner
releases within a fraction of a second of its append, or refreshes it every few seconds while
the append runs."""


def worth_reading_back(claim: PendingWrite, now: datetime) -> bool:
    """The claim says how many messages it appends, and its owner is late releasing it."""
    return claim.expected >= 0 and now - claim.claimed_at >= timedelta(seconds=SETTLE_AFTER_SECONDS)


async def landed_messages(
    openviking: OpenVikingClient,
    tenant: Tenant,
    claim: PendingWrite,
    session_id: str = "",
    *,
    deadline: float | None = None,
) -> dict[int, common_pb2.ConversationMessage]:
    """The claim's messages stored in its session (or `session_id`), live or archived, by position."""
    return {
        turn.sequence: turn.message
        for turn in await session_turns(openviking, tenant, session_id or claim.session_id, deadline=deadline)
        if claim.start_sequence <= turn.sequence <= claim.end_sequence
    }


def all_landed(claim: PendingWrite, landed: dict[int, common_pb2.ConversationMessage]) -> bool:
    return claim.expected >= 0 and len(landed) == claim.expected
