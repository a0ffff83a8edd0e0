"""The hard recall tier end to end at a tiny size against the real stack (CI), and its baselines'
packing; `make bench-recall` runs it at full size."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.tokens import TokenCounter
from tests.bench.recall.dated_baselines import BASELINES, DatedTurn, dated_turns, pack, rrf
from tests.bench.recall.hard_dataset import KINDS, generate_hard
from tests.bench.recall.hard_report import markdown
from tests.bench.recall.hard_run import run_hard
from tests.bench.recall.scoring import BUDGETS, MODES
from tests.support.stack import EmbeddingsEndpoint, OpenVikingEndpoint

COUNTER = TokenCounter("o200k_base")


def test_a_dated_turn_costs_what_the_engine_counts_for_its_line() -> None:
    (conversation,) = generate_hard(seed=1, users=1, sessions=2)
    turns = dated_turns(conversation, COUNTER)
    first = conversation.sessions[0]
    assert (
        turns[0].line
        == f"[{first.started:%Y-%m-%d %H:%M}] {conversation.speakers[0]}: {first.exchanges[0].user}"
    )
    assert turns[1].line.split("] ", 1)[1].startswith(f"{conversation.speakers[1]}: ")
    assert all(t.tokens == COUNTER.count_message([t.line]) for t in turns)


@given(
    st.lists(st.integers(min_value=1, max_value=80), min_size=1, max_size=30),
    st.integers(min_value=0, max_value=600),
    st.randoms(use_true_random=False),
)
def test_pack_keeps_rank_order_within_the_room(costs: list[int], room: int, rng: random.Random) -> None:
    turns = [DatedTurn(f"turn {i}", cost) for i, cost in enumerate(costs)]
    order = list(range(len(turns)))
    rng.shuffle(order)
    kept = pack(turns, order, room).splitlines()
    assert sum(turns[int(line.split()[1])].tokens for line in kept) <= room
    positions = [order.index(int(line.split()[1])) for line in kept]
    assert positions == sorted(positions)
    skipped = [i for i in order if f"turn {i}" not in kept]
    used = sum(costs[int(line.split()[1])] for line in kept)
    assert all(costs[i] > room - used for i in skipped)  # nothing left out that would still fit


def test_rrf_prefers_what_both_rankings_agree_on() -> None:
    fused = rrf([[0, 1, 2, 3], [2, 0, 3, 1]])
    assert fused[:2] == [0, 2]
    assert sorted(fused) == [0, 1, 2, 3]


@pytest.mark.stack
async def test_hard_tier_replays_scores_and_times(
    openviking: OpenVikingEndpoint, embeddings: EmbeddingsEndpoint, tmp_path: Path
) -> None:
    args = argparse.Namespace(
        hard_users=1,
        hard_sessions=3,
        seed=11,
        concurrency=4,
        latency_n=2,
        scale_exchanges=100,
        ask_by_nickname=True,
    )
    report = await run_hard(args, openviking.base_url, embeddings.base_url, tmp_path)
    report = json.loads(json.dumps(report))  # as bench-results/recall-hard.json holds it
    engine, baselines = report["engine"], report["baselines"]
    assert set(engine) == set(MODES)
    assert set(baselines) == set(BASELINES)
    for rows in [*engine.values(), *baselines.values()]:
        assert set(rows) == {str(b) for b in BUDGETS}
        for row in rows.values():
            assert {"recall", "tokens", "max_over", *(f"recall_{k}" for k in KINDS)} <= set(row)
            assert 0 <= row["recall"] <= 100
    for name in ("bm25", "dense", "rrf"):  # a ranked index beats the newest-turns window
        assert baselines[name]["1000"]["recall"] > baselines["truncation"]["1000"]["recall"]
    assert engine["new"]["8000"]["recall"] > 0
    assert report["over_budget"] == []
    scale = report["scale"]
    assert scale["stored_exchanges"] == 100
    assert scale["assemble_p50_ms"] > 0 and scale["next_call_p50_ms"] > 0 and scale["find_p50_ms"] > 0
    text = markdown(report)
    assert "| engine, continuing session |" in text and "| RRF(BM25 + MiniLM) over raw dated turns |" in text
    assert "No context over its budget." in text and "asked about by nickname" in text
