"""Where the engine's own time goes in one Assemble over the long transcript: cProfile.

The AssemblyService runs inside the bench process against the same OpenViking, memories and
persisted session as the assembly phase; each call parses the request from its wire bytes and
serialises the reply, as the gRPC server does (only grpc's C core is left out). Reported:

- CPU ms per Assemble (`time.thread_time` of the event loop's thread, without the profiler): the
  engine's own work, the OpenViking client's included, waits and other threads excluded;
- of which Python's garbage collector (`gc.callbacks`), per Assemble, by generation collected;
- the top functions by own time (cProfile `tottime`) over the profiled calls, the event loop's
  poll (time spent waiting for OpenViking) left out.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import time
from pathlib import Path
from typing import Any

from contextengine.v1 import assembly_pb2

from services.assembly import assembly_servicer
from services.assembly.request_wire import ASSEMBLE_WIRE
from shared.config import Settings
from shared.runtime.context import build_openviking_client
from tests.bench.common import percentile, rounded

TOP_FUNCTIONS = 25
WAITS = ("poll' of 'select.epoll", "select' of 'select")
"""Built-ins whose own time is the event loop waiting, not work."""


class _CollectorTime:
    """Time the garbage collector runs while active, and its collections by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __enter__(self) -> _CollectorTime:
        gc.callbacks.append(self._observe)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._started
        self.collections[info["generation"]] += 1


class _NoDeadline:
    """The part of a gRPC servicer context Assemble reads: the caller set no deadline."""

    def time_remaining(self) -> float | None:
        return None


def _top(profile: cProfile.Profile, calls: int) -> list[dict[str, Any]]:
    stats = pstats.Stats(profile)
    rows: list[dict[str, Any]] = []
    for (path, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}({name})" if line else name
        if any(w in where for w in WAITS):
            continue
        rows.append(
            {
                "function": where,
                "calls_per_assemble": rounded(ncalls / calls, 1),
                "own_ms_per_assemble": rounded(tottime * 1000 / calls, 3),
                "cumulative_ms_per_assemble": rounded(cumtime * 1000 / calls, 3),
            }
        )
    rows.sort(key=lambda r: r["own_ms_per_assemble"], reverse=True)
    return rows[:TOP_FUNCTIONS]


async def profile_assemble(
    openviking_url: str, requests: list[assembly_pb2.AssembleRequest], out_dir: Path
) -> dict[str, Any]:
    """Two warm-up calls (a long-lived replica's caches), then each request timed, then profiled."""
    settings = Settings(base_url=openviking_url)
    wires = [r.SerializeToString() for r in requests]
    async with build_openviking_client(settings) as client:
        servicer = assembly_servicer(settings, client)

        async def one(wire: bytes) -> bytes:
            reply = await servicer.assemble_wire(ASSEMBLE_WIRE.parse(wire), _NoDeadline())  # type: ignore[arg-type]
            return reply.SerializeToString()

        for wire in wires[:2]:
            await one(wire)
        cpu_ms: list[float] = []
        with _CollectorTime() as collector:
            for wire in wires:
                start = time.thread_time()
                await one(wire)
                cpu_ms.append((time.thread_time() - start) * 1000)
        profile = cProfile.Profile()
        profile.enable()
        for wire in wires:
            await one(wire)
        profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(60)
    (out_dir / "assemble-profile.txt").write_text(text.getvalue())
    profile.dump_stats(str(out_dir / "assemble-profile.pstats"))
    return {
        "calls": len(wires),
        "transcript_messages": len(requests[0].messages) if requests else 0,
        "cpu_ms_p50": rounded(percentile(cpu_ms, 50)),
        "cpu_ms_p95": rounded(percentile(cpu_ms, 95)),
        "gc_ms_per_call": rounded(collector.seconds * 1000 / max(1, len(wires))),
        "gc_collections": collector.collections,
        "top": _top(profile, len(wires)),
    }
