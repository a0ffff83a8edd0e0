# ruff: noqa: RUF001, PLR0915
"""The bench run: engine up, every phase in order, spans summarised; the report dict."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import grpc
import httpx
from contextengine.v1 import (
    assembly_pb2_grpc,
    capture_pb2_grpc,
    compaction_pb2_grpc,
)

from shared.config import Settings
from shared.localstack.stack import LocalStack
from shared.tokens import TokenCounter
from tests.bench.common import MODEL, SpanWindows, Stubs, log, rounded
from tests.bench.cpu import CpuMeter, per_turn_ms
from tests.bench.engine import GRPC_OPTIONS, peak_rss_mb, start_engine, stop_engine
from tests.bench.phases.assembly import phase_assembly
from tests.bench.phases.compaction import phase_compaction
from tests.bench.phases.growth import phase_growth, phase_growth_raw
from tests.bench.phases.index_lag import phase_index_lag
from tests.bench.phases.recall import phase_recall
from tests.bench.phases.traffic import (
    phase_concurrency,
    phase_openviking_raw,
    prepare_indexed_users,
    store_facts,
)
from tests.bench.report.markdown import machine_info
from tests.bench.report.spans import calls_per_turn, route_summary, wrapped_summary
from tests.bench.traces import SpanSink
from tests.bench.workload import generate

QUIET_BEFORE_READING = ("openviking", "embeddings")
"""A traffic phase's CPU is read once these went quiet: the turn index embeds after the answers."""
INDEX_HOLD_SECONDS = Settings.model_fields["turn_index_coalesce_ms"].default / 1000 + 0.5
"""Capture holds a turn's exchanges this long at most before it writes them to the turn index: an
engine phase's CPU is read after that (and once OpenViking and the embedder are quiet again)."""
SETTLE_CAP_SECONDS = 240.0
"""Longest wait for the assembly phase's seeded memories and ingested exchanges to be embedded."""


async def with_cpu(meter: CpuMeter, phase: Awaitable[dict[str, Any]], *, held: float = 0.0) -> dict[str, Any]:
    """A traffic phase's result with its CPU per turn by process, read once its background work
    has ended (`held`: seconds the engine may still hold work back before it starts)."""
    before = meter.snapshot()
    result = await phase
    await asyncio.sleep(held)
    await meter.quiet(*QUIET_BEFORE_READING)
    result["cpu_ms_per_turn"] = per_turn_ms(meter.since(before), result["turns"])
    return result


async def run_bench(
    args: argparse.Namespace, stack: LocalStack, stack_seconds: float, t0: float
) -> dict[str, Any]:
    counter = TokenCounter.for_model(MODEL, "o200k_base")
    workload = generate(args.sessions, args.turns, args.seed)
    out_dir = Path(args.out)
    report: dict[str, Any] = {
        "command": " ".join(["python -m tests.bench.run", *sys.argv[1:]]),
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t0)),
        "args": vars(args),
        "machine": machine_info(),
        "workload": {
            "sessions": len(workload.sessions),
            "turns": args.turns,
            "users": len(workload.users),
            "facts": len(workload.facts),
            "stored_facts": sum(f.stored for f in workload.facts),
        },
        "stack_startup_seconds": stack_seconds,
        "extraction": stack.extraction_description,
        "notes": ["No LLM: extraction is off; every other planted fact is stored with StoreMemory."],
    }
    log("starting engine services (one process each)")
    engine_start = time.monotonic()
    sink = SpanSink().start() if args.trace else None
    trace_env = (
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1024",
        }
        if sink
        else {"OTEL_SDK_DISABLED": "true"}
    )
    spans = SpanWindows()
    try:
        procs = start_engine(stack.openviking_url, out_dir, trace_env)
    except RuntimeError as exc:
        log(f"ENGINE DID NOT START: {exc}")
        report["engine_error"] = str(exc)[-2000:]
        async with httpx.AsyncClient(base_url=stack.openviking_url, timeout=60) as http:
            report["openviking_raw"] = [
                await phase_openviking_raw(http, workload, c, args) for c in args.concurrency
            ]
        report["peak_rss"] = {m.spec.name: peak_rss_mb(m.pid) for m in stack.processes}
        return report
    report["engine_startup_seconds"] = rounded(time.monotonic() - engine_start)
    try:
        channels = {
            name: grpc.aio.insecure_channel(p.address, options=GRPC_OPTIONS) for name, p in procs.items()
        }
        stubs = Stubs(
            capture=capture_pb2_grpc.CaptureServiceStub(channels["capture"]),
            assembly=assembly_pb2_grpc.AssemblyServiceStub(channels["assembly"]),
            compaction=compaction_pb2_grpc.CompactionServiceStub(channels["compaction"]),
        )
        async with httpx.AsyncClient(
            base_url=stack.openviking_url, timeout=60, limits=httpx.Limits(max_connections=64)
        ) as http:
            log(f"storing {report['workload']['stored_facts']} planted facts with StoreMemory")
            report["store"] = await store_facts(stubs, workload, args)
            report["concurrency"] = []
            report["openviking_raw"] = []
            report["openviking_raw_indexed"] = []
            meter = CpuMeter(
                {f"engine:{name}": p.process.pid for name, p in procs.items()}
                | {m.spec.name: m.pid for m in stack.processes},
                alone={"bench client": os.getpid()},
            )
            await prepare_indexed_users(http, workload)
            await meter.quiet(*QUIET_BEFORE_READING)
            for level in args.concurrency:
                log(f"replaying {len(workload.sessions)}×{args.turns} at concurrency {level}")
                window_start = time.time_ns()

                async def replayed(level: int = level, window_start: int = window_start) -> dict[str, Any]:
                    result, _ = await phase_concurrency(stubs, workload, level, args, counter)
                    spans.phases.append((f"concurrency {level}", window_start, time.time_ns()))
                    return result

                result = await with_cpu(meter, replayed(), held=INDEX_HOLD_SECONDS)
                spans.traffic.append((f"concurrency {level}", window_start, time.time_ns(), result["turns"]))
                report["concurrency"].append(result)
                log(
                    f"  {result['turns']} turns in {result['wall_s']} s; errors "
                    f"{ {k: v['errors'] for k, v in result['ops'].items()} }"
                )
                log(f"OpenViking-only equivalent at concurrency {level}")
                raw = await with_cpu(meter, phase_openviking_raw(http, workload, level, args))
                report["openviking_raw"].append(raw)
                log(f"  {raw['turns']} turns in {raw['wall_s']} s")
                log(f"the same, each exchange also written to the turn index, at concurrency {level}")
                indexed = await with_cpu(
                    meter, phase_openviking_raw(http, workload, level, args, index_turns=True)
                )
                report["openviking_raw_indexed"].append(indexed)
                log(f"  {indexed['turns']} turns in {indexed['wall_s']} s")
            if args.lag_burst > 0:
                log(f"turn-index lag: a burst at {args.lag_burst} callers, then sessions one at a time")
                report["index_lag"] = await phase_index_lag(stubs, http, workload, args)
                log(f"  {report['index_lag']['burst']} / {report['index_lag']['after_burst']}")
            if args.memories > 0 and args.assembly_turns > 0:
                log(
                    f"assembly: {args.memories} memories, {args.assembly_turns}-turn session, "
                    f"concurrency {args.concurrency}"
                )
                report["assembly"] = await phase_assembly(
                    stubs,
                    http,
                    args,
                    counter,
                    spans,
                    settle=lambda: meter.quiet(*QUIET_BEFORE_READING, cap=SETTLE_CAP_SECONDS),
                )
            if args.compact_sessions or args.compact_turns:
                log("compaction and expand")
                window_start = time.time_ns()
                report["compaction"] = await phase_compaction(stubs, workload, args, spans)
                spans.phases.append(("compaction", window_start, time.time_ns()))
            log(f"single-session growth up to {args.growth_turns} turns (cap {args.growth_seconds} s)")
            window_start = time.time_ns()
            report["growth"] = await phase_growth(stubs, args, counter)
            spans.phases.append(("growth", window_start, time.time_ns()))
            g = report["growth"]
            if g:
                log(f"  {g['turns_done']} turns in {g['wall_s']} s")
            log("the same growth straight into OpenViking (one message per call)")
            report["growth_raw"] = await phase_growth_raw(http, args)
            if report["growth_raw"]:
                log(f"  {report['growth_raw']['turns_done']} turns in {report['growth_raw']['wall_s']} s")
            log("planted-fact recall probes")
            report["recall"] = await phase_recall(stubs, workload, args, counter)
        for channel in channels.values():
            await channel.close()
        rss: dict[str, Any] = {}
        for name, proc in procs.items():
            rss[f"engine:{name}"] = peak_rss_mb(proc.process.pid)
        for managed in stack.processes:
            rss[managed.spec.name] = peak_rss_mb(managed.pid)
        report["peak_rss"] = rss
    finally:
        stop_engine(procs)
        if sink is not None:
            await asyncio.sleep(1.0)
            snapshot = sink.snapshot()
            report["wrapped"] = wrapped_summary(snapshot, spans.phases)
            report["openviking_routes"] = route_summary(snapshot, spans.routes)
            report["openviking_calls_per_turn"] = calls_per_turn(snapshot, spans.traffic)
            sink.stop()
    return report
