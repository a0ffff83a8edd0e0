# ruff: noqa: RUF002
"""`make bench`: latency, throughput, token and recall benchmark of the engine over a local stack.

Starts the local stack (embeddings + OpenViking, temp data dir, free ports, no LLM), then the
three services as separate processes (`python -m shared.runtime.main --service X`), replays a
seeded workload (tests/bench/workload.py) through the public gRPC API and writes
`bench-results/report.json`, `bench-results/report.png` (when matplotlib is installed),
`bench-results/report.md` and prints a summary table.

Phases (each time-capped so the default finishes in well under 15 minutes on 2 cores):
1. StoreMemory for every other planted fact (no LLM: OpenViking extracts nothing by itself).
2. Replay the workload at 1, 8 and 32 concurrent sessions: per turn Assemble, then AfterTurn.
3. The same traffic shape straight against OpenViking over HTTP (find ×2 + session context per
   "assemble", batch add per "after turn"): OpenViking's own time, to separate the engine's.
4. Assembly at scale: 1,000 memories (content/write, wait=false) and a 500-turn session persisted
   with Ingest; Assemble with the whole transcript at 1, 8 and 32 concurrent callers, split into the
   engine's own time and the OpenViking calls it makes (by route), assembled vs transcript tokens;
   each round of Assembles followed by one OpenViking `find` per query at the same concurrency; then
   Assemble in process under cProfile (`bench-results/assemble-profile.txt`).
5. Compact (force) on replayed sessions and on 50/500/2,000-turn sessions (twins: one synchronous,
   one background=true polled with GetCheckpoint until COMPLETED; OpenViking's commit call from the
   spans), then ExpandMemory over every compacted session (varied query and limit).
6. One long session: AfterTurn latency as it grows to --growth-turns (tool results cut short), then
   the same session straight into OpenViking, one add-message call per message.
7. Planted-fact recall probes: engine Assemble in a new session / late in the same session vs the
   full transcript truncated newest-first to the same budget vs the legacy RecallFallback block.
8. Peak RSS (VmHWM) of each service process, OpenViking and the embedding server.

The report opens with the performance issue's targets: each measured value beside its baseline
from the same run, the ratio and whether it is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from shared.localstack.stack import LocalStack, StackSettings
from shared.tokens import ensure_offline_tiktoken
from tests.bench.common import log
from tests.bench.pipeline import run_bench
from tests.bench.report.chart import write_chart
from tests.bench.report.markdown import markdown
from tests.bench.report.tables import summary_table
from tests.bench.report.targets import targets_json


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--budget", type=int, default=2000, help="token budget of Assemble and the baselines")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    parser.add_argument("--level-seconds", type=float, default=80, help="cap per concurrency level")
    parser.add_argument("--compact-sessions", type=int, default=6, help="replayed sessions to compact")
    parser.add_argument(
        "--compact-turns", type=lambda s: [int(x) for x in s.split(",") if x], default=[50, 500, 2000]
    )
    parser.add_argument("--ingest-batch", type=int, default=400, help="messages per Ingest for long sessions")
    parser.add_argument(
        "--expand-calls", type=int, default=60, help="ExpandMemory calls over compacted sessions"
    )
    parser.add_argument(
        "--lag-burst",
        type=int,
        default=32,
        help="callers of the turn-index lag phase's burst (0: no lag phase)",
    )
    parser.add_argument("--lag-sample", type=int, default=8, help="probe every n-th turn of the lag phase")
    parser.add_argument("--memories", type=int, default=1000, help="memories seeded for the assembly phase")
    parser.add_argument("--memory-write-concurrency", type=int, default=8)
    parser.add_argument("--memory-index-timeout", type=float, default=180)
    parser.add_argument("--assembly-turns", type=int, default=500)
    parser.add_argument("--assembly-budget", type=int, default=16_000)
    parser.add_argument(
        "--assembly-calls",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[40, 80, 96],
        help="Assemble calls per concurrency level (same order as --concurrency)",
    )
    parser.add_argument("--assembly-level-seconds", type=float, default=60)
    parser.add_argument(
        "--profile-calls", type=int, default=20, help="Assembles profiled in process (cProfile); 0: none"
    )
    parser.add_argument("--growth-turns", type=int, default=1000)
    parser.add_argument("--growth-seconds", type=float, default=200)
    parser.add_argument(
        "--growth-tool-chars", type=int, default=300, help="tool results of the growth session cut to this"
    )
    parser.add_argument("--growth-budget", type=int, default=128_000)
    parser.add_argument("--rpc-timeout", type=float, default=60)
    parser.add_argument(
        "--no-trace",
        dest="trace",
        action="store_false",
        help="do not export the services' spans (no engine/OpenViking split from inside)",
    )
    parser.add_argument("--out", default="bench-results")
    parser.add_argument(
        "--docs", default=None, help="also write the markdown report here (docs/benchmarks.md)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    t0 = time.time()
    ensure_offline_tiktoken()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="ce-bench-ov-"))
    try:
        stack_start = time.monotonic()
        with LocalStack(
            StackSettings(openviking_data_dir=data_dir, openviking_port=0, embeddings_port=0, llm=None)
        ) as stack:
            stack_seconds = time.monotonic() - stack_start
            log(f"stack up in {stack_seconds:.0f} s: OpenViking {stack.openviking_url}")
            report = asyncio.run(run_bench(args, stack, stack_seconds, t0))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    report["total_seconds"] = round(time.time() - t0, 1)
    report["targets"] = targets_json(report)
    table = summary_table(report)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=str))
    problem = write_chart(report, out_dir / "report.png")
    md = markdown(report, table)
    (out_dir / "report.md").write_text(md)
    if args.docs:
        Path(args.docs).write_text(md)
    print("\n" + table + "\n", flush=True)
    log(
        f"total {report['total_seconds']:.0f} s; wrote {out_dir}/report.json"
        + ("" if problem else f", {out_dir}/report.png")
    )
    if problem:
        log(problem)


if __name__ == "__main__":
    main()
