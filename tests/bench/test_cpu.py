"""The bench's CPU accounting by process (`tests.bench.cpu`) and its table."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from tests.bench.cpu import CpuMeter, cpu_seconds, per_turn_ms
from tests.bench.report.tables import CPU_PARTS, cpu_table

SPIN = "import time\nwhile True: time.perf_counter()"


def test_a_busy_process_counts_an_idle_one_does_not_and_alone_leaves_children_out() -> None:
    """CPU is read from /proc: a spinning process shows, a sleeping one adds (almost) nothing;
    this process's tree holds the spinner, this process alone does not."""
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        meter = CpuMeter(
            {"spinner": spinner.pid, "sleeper": sleeper.pid, "tree": os.getpid()}, alone={"self": os.getpid()}
        )
        asyncio.run(asyncio.sleep(0.3))  # both past start-up
        before = meter.snapshot()
        asyncio.run(asyncio.sleep(1.0))
        used = meter.since(before)
        assert used["spinner"] > 0.2
        assert used["sleeper"] < 0.05
        assert used["tree"] > 0.2
        assert used["self"] < 0.1
        assert cpu_seconds(spinner.pid) >= before["spinner"] + used["spinner"]
    finally:
        spinner.kill()
        sleeper.kill()
        spinner.wait()
        sleeper.wait()
    assert cpu_seconds(spinner.pid) == 0.0  # gone: nothing to read


def test_quiet_returns_for_an_idle_process_and_gives_up_on_a_busy_one_at_the_cap() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spinner = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        meter = CpuMeter({"sleeper": sleeper.pid, "spinner": spinner.pid})
        waited = asyncio.run(meter.quiet("sleeper"))
        assert waited < 2.5  # two quiet looks in a row, perhaps after its start-up
        waited = asyncio.run(meter.quiet("sleeper", "spinner", cap=1.5))
        assert 1.5 <= waited < 3.0  # never quiet: the cap ends the wait
    finally:
        for process in (sleeper, spinner):
            process.kill()
            process.wait()


@given(
    st.dictionaries(st.sampled_from(CPU_PARTS), st.floats(0, 1000, allow_nan=False), min_size=1),
    st.integers(1, 10_000),
)
def test_per_turn_parts_add_up_to_the_total(cpu: dict[str, float], turns: int) -> None:
    per_turn = per_turn_ms(cpu, turns)
    parts = sum(v for k, v in per_turn.items() if k != "total")
    assert abs(per_turn["total"] - parts) <= 0.05 * len(cpu) + 1e-6
    assert abs(per_turn["total"] - sum(cpu.values()) * 1000 / turns) <= 0.05
    assert per_turn_ms(cpu, 0) == {}


def test_cpu_table_puts_the_engine_beside_openviking_only() -> None:
    engine = {"engine:capture": 12.0, "openviking": 167.0, "embeddings": 135.0, "total": 314.0}
    raw = {"openviking": 48.0, "embeddings": 57.0, "total": 105.0}
    report = {
        "concurrency": [{"concurrency": 8, "cpu_ms_per_turn": engine}],
        "openviking_raw": [{"concurrency": 8, "cpu_ms_per_turn": raw}, {"concurrency": 1}],
    }
    rows = [line for line in cpu_table(report) if line.startswith("| engine") or line.startswith("| OpenV")]
    assert len(rows) == 2
    assert rows[0] == "| engine | 8 | 12.0 | — | — | 167.0 | 135.0 | — | 314.0 |"
    assert rows[1] == "| OpenViking only | 8 | — | — | — | 48.0 | 57.0 | — | 105.0 |"
    assert cpu_table({"concurrency": [{"concurrency": 1}]}) == []
