"""Summaries of summaries keep a long session's past inside a budget (pure logic, real tokenizer)."""

from __future__ import annotations

from services.compaction.history import summary_of_summaries
from shared.tokens import TokenCounter
from tests.compaction.long_session import measured_levels

COUNT = TokenCounter.for_model("", "o200k_base")


def test_a_2000_turn_session_compacted_20_times_fits_its_summaries_in_1k_tokens() -> None:
    levels, shown = measured_levels(compactions=20, turns_each=100, max_tokens=200)
    assert [level.name for level in levels] == ["earlier", "checkpoint 18", "checkpoint 19", "checkpoint 20"]
    assert sum(level.tokens for level in levels) <= 1000
    assert all(level.tokens <= 200 for level in levels)
    # Together they cover every turn once: the earlier summary the first 17 compactions.
    assert [level.covers_turns for level in levels] == [1700, 100, 100, 100]
    assert shown[0].covers_checkpoints == 17
    # What each keeps is measured against its own source turns' terms (the union for `earlier`).
    earlier = levels[0]
    assert all(0 <= earlier.kept[k] <= earlier.total[k] for k in earlier.total)
    assert earlier.total["numbers"] > max(level.total["numbers"] for level in levels[1:])
    assert earlier.kept["names"] >= 0.75 * earlier.total["names"]


def test_a_summary_of_summaries_only_says_what_its_parts_said() -> None:
    _levels, shown = measured_levels(compactions=6, turns_each=40, max_tokens=120)
    parts = shown[1:]
    merged = summary_of_summaries(parts, max_tokens=150, count=COUNT)
    assert merged is not None and merged.tokens <= 150
    said = {s.text for part in parts for s in part.sentences}
    assert merged.sentences and all(s.text in said for s in merged.sentences)
    assert merged.covers_turns == sum(p.covers_turns for p in parts)
    assert merged.covers_checkpoints == len(parts)
    positions = [s.position for s in merged.sentences]
    assert positions == sorted(positions)  # in conversation order across checkpoints


def test_no_parts_no_summary() -> None:
    assert summary_of_summaries([], max_tokens=200, count=COUNT) is None
