"""Handing a compaction off (docs/design.md §3.2 step 8, §3.4 step 1): one compare-and-swap on the stream
state moves new turns to a fresh OpenViking session and records the compaction as in flight.

Whoever decides to compact (capture when a trigger fires, on flush, or compaction on an explicit
Compact) applies `hand_off` inside its own compare-and-swap, so the request is durable in
OpenViking before the deciding call returns; CompactionService then owns it to the end
(`services.compaction.worker`), and any of its replicas resumes it from this record.
"""

from __future__ import annotations

from datetime import datetime

from shared.domain.stream_state import InflightCompaction, StreamState, session_id_for

WRITE_IN_PROGRESS_GRACE_SECONDS = 10.0
"""A capture append claimed (or refreshed) this recently on the active session is waited for."""


def has_uncommitted_turns(state: StreamState) -> bool:
    return state.turns_since_compaction > 0 or state.tokens_since_compaction > 0


def compaction_inflight_for_active(state: StreamState) -> bool:
    return any(c.session_id == state.active_session for c in state.inflight)


def hand_off(
    state: StreamState,
    checkpoint_id: str,
    *,
    now: datetime,
    trigger: int,
    force: bool = False,
    tokens_before: int = 0,
    traceparent: str = "",
) -> StreamState | bool | None:
    """Move new turns to a fresh session and record the compaction of the old one.

    Returns the changed state; None when there is nothing to compact; False while a write to
    the active session is in progress or not yet released (retry shortly).
    """
    pending = state.pending_write
    if (
        pending is not None
        and pending.session_id == state.active_session
        and (now - pending.claimed_at).total_seconds() < WRITE_IN_PROGRESS_GRACE_SECONDS
    ):
        return False  # its release adds the turns that are not counted yet
    if not has_uncommitted_turns(state) and not force:
        return None
    old_session = state.active_session
    state.inflight.append(
        InflightCompaction(
            checkpoint_id=checkpoint_id,
            session_id=old_session,
            started_at=now,
            trigger=trigger,
            tokens_before=tokens_before or state.active_tokens,
            origin_traceparent=traceparent,
        )
    )
    state.generation += 1
    state.active_session = session_id_for(state.stream_id, state.generation)
    state.sessions.append(state.active_session)
    state.turns_since_compaction = 0
    state.tokens_since_compaction = 0
    state.active_tokens = 0
    state.last_compaction_at = now
    state.checkpoint_ids.append(checkpoint_id)
    return state
