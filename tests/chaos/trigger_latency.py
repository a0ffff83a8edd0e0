"""AfterTurn latency of turns that fire a compaction trigger against turns that do not.

`python -m tests.chaos.trigger_latency [--embeddings-url URL] [--sessions 6 --turns 24 --threshold 4]
[--pause-ms 1200]` (part of `make bench`) starts a private OpenViking (extraction off; its own
embedding server unless one is given) and the three services in one process (as
`context-engine --service all`), plays the turns one after another and prints p50/p90 of each
kind and the firing / quiet ratio (docs/design.md §3.2: the commit runs in the background, the turn returns at
once). Turns that do not fire are also split by whether the turn before fired: with a pause after
every turn (a host's model call) longer than a compaction, that next turn is the first to write
the stream state after the compaction's hand-off wrote it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from contextengine.v1 import capture_pb2_grpc, common_pb2
from grpc import aio

from shared.config import load_settings
from shared.localstack.processes import free_port
from shared.runtime.main import start_host
from tests.chaos.host import HostSession
from tests.support.private_stack import private_stack


def _quantiles(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=10)
    return statistics.median(values), cuts[8]


async def measure(
    base_url: str, sessions: int, turns: int, threshold: int, pause: float = 0.0
) -> dict[str, list[float]]:
    settings = load_settings(
        environ={},
        overrides={"baseUrl": base_url, "grpcPort": free_port(), "compactTurnThreshold": threshold},
    )
    host = await start_host(settings, "all")
    timings: dict[str, list[float]] = {"firing": [], "quiet": [], "after firing": []}
    try:
        async with aio.insecure_channel(host.address) as channel:
            stub = capture_pb2_grpc.CaptureServiceStub(channel)
            run = uuid.uuid4().hex[:6]
            for i in range(sessions):
                session = HostSession(
                    common_pb2.Identity(
                        account_id="lat", user_id="u", agent_id="main", session_id=f"l{run}-{i}"
                    )
                )
                fired = False
                for _ in range(turns):
                    request = session.next_turn()
                    started = time.perf_counter()
                    response = await stub.AfterTurn(request, timeout=60)
                    elapsed = (time.perf_counter() - started) * 1000
                    kind = "firing" if response.trigger_fired else "after firing" if fired else "quiet"
                    timings[kind].append(elapsed)
                    fired = response.trigger_fired
                    await asyncio.sleep(pause)
    finally:
        await host.stop()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embeddings-url", default=None, help="reuse this embedding server (.../v1)")
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--threshold", type=int, default=4)
    parser.add_argument("--pause-ms", type=float, default=0.0, help="idle after every turn")
    args = parser.parse_args()
    with private_stack(args.embeddings_url) as stack:
        timings = asyncio.run(
            measure(stack.openviking_url, args.sessions, args.turns, args.threshold, args.pause_ms / 1000)
        )
    for kind, values in timings.items():
        p50, p90 = _quantiles(values)
        print(f"{kind} turns: n={len(values)} p50={p50:.1f} ms p90={p90:.1f} ms")
    firing, quiet = statistics.median(timings["firing"]), statistics.median(timings["quiet"])
    print(f"p50 ratio firing/quiet: {firing / quiet:.2f}")


if __name__ == "__main__":
    main()
