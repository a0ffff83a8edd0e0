"""CPU time per process (and its children) from /proc: where a phase's work went.

Wall-clock throughput on a 2-core machine says how many turns fit, not who spent the CPU. A
phase's CPU by process (engine services, OpenViking, the embedding server, the bench client)
divided by its turns shows what one turn costs each part, background work included: the meter
is read again only once OpenViking and the embedder have gone quiet after the phase.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from pathlib import Path

from tests.bench.engine import descendants

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
QUIET_SHARE = 0.1
"""Below this share of one core over a look, a process counts as quiet (OpenViking idles at ~3%)."""
QUIET_LOOK_SECONDS = 0.5
QUIET_LOOKS = 2
"""Quiet looks in a row: OpenViking's queues work in bursts."""
QUIET_CAP_SECONDS = 30.0


def cpu_seconds(pid: int, *, with_descendants: bool = True) -> float:
    """User + system CPU of `pid` and (unless told not to) its live descendants; 0 for a process
    that is gone."""
    total = 0.0
    for one in (pid, *descendants(pid)) if with_descendants else (pid,):
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND
    return total


class CpuMeter:
    """CPU seconds of named process trees, and of named processes `alone` (without their
    descendants: the bench process is the parent of every other one), as snapshots."""

    def __init__(self, trees: Mapping[str, int], alone: Mapping[str, int] | None = None) -> None:
        self._trees = dict(trees)
        self._alone = dict(alone or {})

    def snapshot(self) -> dict[str, float]:
        out = {name: cpu_seconds(pid) for name, pid in self._trees.items()}
        out |= {name: cpu_seconds(pid, with_descendants=False) for name, pid in self._alone.items()}
        return out

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        now = self.snapshot()
        return {name: now[name] - before.get(name, 0.0) for name in now}

    async def quiet(self, *names: str, cap: float = QUIET_CAP_SECONDS) -> float:
        """Wait until every named process has used under `QUIET_SHARE` of a core over
        `QUIET_LOOKS` looks in a row (at most `cap` seconds); the seconds waited."""
        start = time.monotonic()
        last = self.snapshot()
        quiet_looks = 0
        while quiet_looks < QUIET_LOOKS and time.monotonic() - start < cap:
            await asyncio.sleep(QUIET_LOOK_SECONDS)
            now = self.snapshot()
            quiet = all(now[n] - last[n] < QUIET_SHARE * QUIET_LOOK_SECONDS for n in names)
            quiet_looks = quiet_looks + 1 if quiet else 0
            last = now
        return time.monotonic() - start


def per_turn_ms(cpu: Mapping[str, float], turns: int) -> dict[str, float]:
    """CPU ms per turn by process, and their `total`."""
    if not turns:
        return {}
    out = {name: round(seconds * 1000 / turns, 1) for name, seconds in cpu.items()}
    out["total"] = round(sum(cpu.values()) * 1000 / turns, 1)
    return out
