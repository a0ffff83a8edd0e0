"""Compaction triggers (docs/design.md §3.2 step 7): checked in priority order, the first hit wins."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from contextengine.v1 import checkpoint_pb2

from shared.config import Settings
from shared.domain.stream_state import StreamState

Trigger = checkpoint_pb2.CompactionTrigger


@dataclass(frozen=True)
class TriggerThresholds:
    commit_fraction: float
    """BUDGET fires at `active_tokens >= token_budget * commit_fraction`."""
    default_token_budget: int
    """Budget used when the host sends none."""
    tokens_added: int
    """TOKENS_ADDED fires at `tokens_since_compaction >= tokens_added`."""
    turns: int
    """TURN_COUNT fires at `turns_since_compaction >= turns`."""
    interval: timedelta
    """INTERVAL fires this long after the last compaction (or the stream's start) with >= 1 new turn."""

    @classmethod
    def from_settings(cls, settings: Settings) -> TriggerThresholds:
        return cls(
            commit_fraction=settings.compact_commit_threshold,
            default_token_budget=settings.default_token_budget,
            tokens_added=settings.compact_tokens_added_threshold,
            turns=settings.compact_turn_threshold,
            interval=timedelta(minutes=settings.compact_interval_minutes),
        )


def fired_trigger(
    state: StreamState, thresholds: TriggerThresholds, *, token_budget: int, now: datetime
) -> Trigger.ValueType:
    """The trigger that fires for `state`, `COMPACTION_TRIGGER_UNSPECIFIED` when none does.

    `token_budget` is the host's context window; 0 (or less) means the configured default.
    """
    budget = token_budget if token_budget > 0 else thresholds.default_token_budget
    if state.active_tokens >= budget * thresholds.commit_fraction:
        return checkpoint_pb2.COMPACTION_TRIGGER_BUDGET
    if state.tokens_since_compaction >= thresholds.tokens_added:
        return checkpoint_pb2.COMPACTION_TRIGGER_TOKENS_ADDED
    if state.turns_since_compaction >= thresholds.turns:
        return checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
    since = state.last_compaction_at or state.created_at
    if state.turns_since_compaction >= 1 and now - since >= thresholds.interval:
        return checkpoint_pb2.COMPACTION_TRIGGER_INTERVAL
    return checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED
