# ruff: noqa: RUF001
"""The markdown report around the tables: machine, command, workload, how to read it."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "mem_total_gb": mem_gb,
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def markdown(report: dict[str, Any], table: str) -> str:
    m = report["machine"]
    a = report["args"]
    return f"""# Benchmarks

Measured by `make bench` (`.venv/bin/python -m tests.bench.run`), source in `tests/bench/`.

- Machine: {m["nproc"]} CPUs ({m["cpu"]}), {m["mem_total_gb"]} GB RAM, Python {m["python"]},
  Linux {m["kernel"]}.
- Command: `{report["command"]}`
- Run: {report["started_at"]}, total {report["total_seconds"]:.0f} s including stack startup
  ({report["stack_startup_seconds"]:.0f} s).
- Workload: seed {a["seed"]}, {a["sessions"]} sessions × {a["turns"]} turns over
  {report["workload"]["users"]} users, tool results 80 B–6 kB, topic drift, one planted
  preference/decision per session; token budget {a["budget"]}.
- Topology: embedding server + OpenViking 0.5.2 (local stack, temp data dir) and the three services as
  separate processes (`python -m shared.runtime.main --service X`), all on the same 2-core machine together
  with the bench client.
- No LLM: OpenViking extracts no memories from conversation and commits archive without summaries.
  Half of the planted facts were therefore also stored with `StoreMemory`; hit rates are shown
  for both halves.

{table}

How to read it:
- **OpenViking-only** is the same traffic shape sent straight to OpenViking with httpx at the same
  concurrency: per turn two `search/find` over `viking://~/memories` plus `sessions/{{id}}/context`
  concurrently (the *assemble equivalent*) and one `messages/batch` (the *after-turn equivalent*).
  *Engine overhead* = engine p50 − OpenViking-only p50: the engine's gRPC, validation, packing,
  token counting and the extra calls it makes beyond the equivalent.
- **OpenViking-only + turn index** adds, per turn, the engine's turn-index document of the
  exchange (`content/batch-write`, wait=false, same text and folder, users of its own): OpenViking
  alone doing what lets the engine recall conversation without an LLM. It is context, not the
  issue's baseline.
- **CPU ms per turn by process**: user + system CPU from `/proc` over the phase, read once
  OpenViking and the embedder are quiet again (the turn index embeds after the answers) and, for
  the engine, once capture's turn-index batch window has passed, divided by the phase's turns.
  The *OpenViking calls per turn* table counts the services' client spans started in the same
  window, inside an RPC or after its answer (releases, appends, turn index, compactions the
  triggers hand off).
- **Turn-index lag** (`tests/bench/phases/index_lag.py`): the workload's sessions replayed again
  (Assemble, AfterTurn) all at once at the burst's callers, then one session with 0.5 s between
  turns; every few turns, from AfterTurn's answer, a `find` of the turn's text over its session's
  index folder (pauses growing from 0.2 to 2 s) until the exchange's document is a hit. An
  exchange not found within 60 s is checked with `fs/stat`: *not written* means it was lost.
- **assembled tok/turn** counts (with `shared.tokens.TokenCounter`) what `Assemble` returned,
  against the whole transcript up to that turn.
- **Hit rate**: a planted fact's unique needle appears in the context. `engine_new_session` asks in a
  new session (`Assemble`), `engine_same_session` asks at the end of the original session with its whole
  transcript, `truncated_*` keep the newest messages that fit the budget (same session / all the
  user's sessions), `legacy_recall_fallback` is the `RecallFallback` prepend block.
- **Engine spans** (the wrapping measurement): the services export their spans over OTLP to a
  receiver in the bench; for each server span, *OpenViking* is the union of the OpenViking HTTP client
  spans in its trace (nested engine calls included), *engine own* is the rest (gRPC handling,
  validation, packing, token counting, CAS bookkeeping, polling waits); *before the first* / *after
  the last OpenViking call* is the part of it on the RPC's path before its first OpenViking request
  and after its last answer (the rest overlaps OpenViking's work). Tracing is on for the whole
  run (`--no-trace` turns it off), so every number above includes its small cost.
- **Growth**: one session AfterTurn by AfterTurn, the host re-sending the whole transcript each turn
  (tool results cut to {a["growth_tool_chars"]} characters to reach {a["growth_turns"]} turns within the
  cap); the OpenViking rows grow a twin session with `POST sessions/{{id}}/messages`, one message per
  call, the per-turn row being the sum of a turn's calls. Early/late columns show whether latency
  grows with the session.
- **Assemble at scale**: {a["memories"]} memories written with `content/write` (wait=false) and waited
  for until findable; a {a["assembly_turns"]}-turn session persisted with `Ingest`; then a wait until
  OpenViking and the embedder are quiet (the session's turn index is embedded after Ingest answers);
  each call sends the whole transcript plus a new question. *OpenViking* / *engine own* come from
  the services' spans (below); the route table is every OpenViking call made inside those Assembles.
- **Compact**: each size is ingested twice. The synchronous Compact's latency includes the engine
  waiting (bounded) for OpenViking's phase 2; *OpenViking commit* is the `POST sessions/{{id}}/commit`
  client span inside that RPC (phase 1 on OpenViking's side); the background=true twin returns after
  phase 1 and *to COMPLETED* is from its call until `GetCheckpoint` reports COMPLETED (polled every
  50 ms).
- Peak RSS is `VmHWM` from `/proc/<pid>/status` at the end of the run.

Raw numbers: `bench-results/report.json`; chart: `bench-results/report.png`.
"""
