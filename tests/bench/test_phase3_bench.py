"""The Phase-3 benchmark end to end at a tiny size against the real stack (CI); `make bench` runs
it at full size."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tests.bench.phase3 import markdown, run
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack


async def test_phase3_bench_measures_every_source_next_to_its_baseline(
    openviking: OpenVikingEndpoint, tmp_path: Path
) -> None:
    args = argparse.Namespace(
        skills=20, tasks=8, chats=8, tool_cases=3, stream=10, seed=3, paced=2, pace_seconds=1.0, out=tmp_path
    )
    report = await run(args, openviking.base_url)
    skills, tools, intent = report["skills"], report["tools"], report["intent"]
    assert skills["engine"]["task_hit"] >= 0.75
    assert skills["engine"]["chat_no_skill"] == 1.0
    assert skills["baseline"]["find_top3"]["chat_no_skill"] == 0.0
    assert tools["engine"]["told"] == 1.0 and tools["leaks"] == 0
    assert intent["needs_recall_skipped"] == 0
    assert intent["engine"]["recall_calls"] == 0 < intent["baseline_every_prompt"]["recall_calls"]
    # Latency through the replica in its own process and the in-process one, beside the find.
    latency = skills["latency"]
    assert latency["find_p50_ms"] > 0
    for replica in ("deployed", "in_process"):
        assert latency[f"{replica}_assemble_p50_ms"] > 0 and latency[f"{replica}_question_p50_ms"] > 0
    paced = skills["paced"]
    assert paced["tasks"] == 2 and paced["find_p50_ms"] > 0
    assert all(paced[f"{replica}_assemble_p50_ms"] > 0 for replica in ("deployed", "in_process"))
    text = markdown(report)
    assert "| engine |" in text and "| own process (as deployed) |" in text and "At a host's pace" in text
