"""The recall benchmark end to end at a tiny size against the real stack (CI); `make bench-recall`
runs it at full size."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.bench.recall.run import BUDGETS, markdown, run
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack


async def test_recall_bench_replays_asks_and_scores(openviking: OpenVikingEndpoint, tmp_path: Path) -> None:
    args = argparse.Namespace(
        users=1, sessions=2, seed=5, concurrency=4, latency_n=2, lexical_variants=["off"], llm_users=0
    )
    report = await run(args, openviking.base_url, tmp_path)
    engine, baselines = report["engine"], report["baselines"]
    assert isinstance(engine, dict) and isinstance(baselines, dict)
    assert set(engine) == {"engine", "lexical=off"}
    for mode in ("new", "continuing"):
        rows = engine["engine"][mode]
        assert set(rows) == set(BUDGETS)
        # Recall finds evidence the newest-turns window cannot hold, and never overshoots the budget.
        assert rows[1000]["recall"] > baselines["truncation"][1000]
        assert all(rows[b]["max_over"] <= 0 for b in BUDGETS)
    assert "| engine, new session |" in markdown(report)
