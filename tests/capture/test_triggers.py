"""Compaction triggers fire exactly at their thresholds, in priority order (docs/design.md §3.2 step 7)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from contextengine.v1 import checkpoint_pb2

from services.capture.triggers import TriggerThresholds, fired_trigger
from shared.config import load_settings
from shared.domain.stream_state import StreamState

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
THRESHOLDS = TriggerThresholds(
    commit_fraction=0.75,
    default_token_budget=128_000,
    tokens_added=30_000,
    turns=20,
    interval=timedelta(minutes=30),
)
NONE = checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED


def state(**counters: int | datetime | None) -> StreamState:
    return StreamState(
        host_session_id="s",
        agent_id="a",
        stream_id="x",
        active_session="ce-x-g0000",
        created_at=T0,
        **counters,
    )


def fire(s: StreamState, *, budget: int = 0, now: datetime = T0) -> int:
    return fired_trigger(s, THRESHOLDS, token_budget=budget, now=now)


def test_from_settings_uses_the_configured_values() -> None:
    settings = load_settings(environ={}, overrides={"compactTurnThreshold": 3, "compactIntervalMinutes": 2})
    thresholds = TriggerThresholds.from_settings(settings)
    assert thresholds.turns == 3
    assert thresholds.interval == timedelta(minutes=2)
    assert thresholds.default_token_budget == settings.default_token_budget


def test_nothing_fires_for_a_fresh_stream() -> None:
    assert fire(state()) == NONE


@pytest.mark.parametrize(("budget", "at"), [(0, 96_000), (128_000, 96_000), (1_000, 750), (10, 8)])
def test_budget_fires_exactly_at_budget_times_threshold(budget: int, at: int) -> None:
    assert fire(state(active_tokens=at - 1), budget=budget) == NONE
    assert fire(state(active_tokens=at), budget=budget) == checkpoint_pb2.COMPACTION_TRIGGER_BUDGET


def test_tokens_added_fires_at_threshold() -> None:
    assert fire(state(tokens_since_compaction=29_999)) == NONE
    assert fire(state(tokens_since_compaction=30_000)) == checkpoint_pb2.COMPACTION_TRIGGER_TOKENS_ADDED


def test_turn_count_fires_at_threshold() -> None:
    assert fire(state(turns_since_compaction=19)) == NONE
    assert fire(state(turns_since_compaction=20)) == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT


def test_interval_fires_at_threshold_only_with_a_new_turn() -> None:
    at = T0 + timedelta(minutes=30)
    just_before = at - timedelta(microseconds=1)
    assert fire(state(turns_since_compaction=1), now=just_before) == NONE
    assert fire(state(turns_since_compaction=1), now=at) == checkpoint_pb2.COMPACTION_TRIGGER_INTERVAL
    assert fire(state(turns_since_compaction=0), now=at + timedelta(hours=5)) == NONE


def test_interval_counts_from_the_last_compaction_when_there_was_one() -> None:
    last = T0 + timedelta(hours=1)
    s = state(turns_since_compaction=1, last_compaction_at=last)
    assert fire(s, now=last + timedelta(minutes=29)) == NONE
    assert fire(s, now=last + timedelta(minutes=30)) == checkpoint_pb2.COMPACTION_TRIGGER_INTERVAL


def test_priority_first_hit_wins() -> None:
    late = T0 + timedelta(days=1)
    everything = state(active_tokens=96_000, tokens_since_compaction=30_000, turns_since_compaction=20)
    assert fire(everything, now=late) == checkpoint_pb2.COMPACTION_TRIGGER_BUDGET
    no_budget = state(tokens_since_compaction=30_000, turns_since_compaction=20)
    assert fire(no_budget, now=late) == checkpoint_pb2.COMPACTION_TRIGGER_TOKENS_ADDED
    turns_and_time = state(turns_since_compaction=20)
    assert fire(turns_and_time, now=late) == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
