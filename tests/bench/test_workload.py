"""The benchmark workload is reproducible and plants what the recall probes look for."""

from __future__ import annotations

from shared.tokens import TokenCounter
from tests.bench.common import percentile, truncate_newest_first
from tests.bench.workload import generate


def test_same_seed_same_workload() -> None:
    assert generate(6, 10, 3) == generate(6, 10, 3)
    assert generate(6, 10, 3) != generate(6, 10, 4)


def test_every_session_plants_one_fact_at_its_turn() -> None:
    workload = generate(8, 12, 7)
    assert len(workload.facts) == 8
    assert len({f.needle for f in workload.facts}) == 8
    for session in workload.sessions:
        fact = session.fact
        assert fact is not None
        assert fact.needle in session.turns[fact.turn_index].user
        assert fact.needle in fact.memory_text
        assert fact.needle not in fact.question
        assert all(fact.needle not in t.user for t in session.turns if t.index != fact.turn_index)
    assert [f.stored for f in workload.facts] == [True, False] * 4


def test_sizes_and_drift() -> None:
    workload = generate(16, 12, 11)
    sizes = {len(t.tool.output) for s in workload.sessions for t in s.turns if t.tool}
    assert min(sizes) <= 80
    assert 5900 < max(sizes) <= 6000
    assert any(len({t.topic for t in s.turns}) > 1 for s in workload.sessions)


def test_percentile_and_truncation() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    counter = TokenCounter("o200k_base")
    kept = truncate_newest_first(counter, ["old " * 50, "mid " * 50, "new " * 50], 60)
    assert kept == ["new " * 50]
