# ruff: noqa: RUF001, RUF002, PLR0915, PLR0917, ASYNC109
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
   engine's own time and the OpenViking calls it makes (by route), assembled vs transcript tokens.
5. Compact (force) on replayed sessions and on 50/500/2,000-turn sessions (twins: one synchronous,
   one background=true polled with GetCheckpoint until COMPLETED; OpenViking's commit call from the
   spans), then ExpandMemory over every compacted session (varied query and limit).
6. One long session: AfterTurn latency as it grows to --growth-turns (tool results cut short), then
   the same session straight into OpenViking, one add-message call per message.
7. Planted-fact recall probes: engine Assemble in a new session / late in the same session vs the
   full transcript truncated newest-first to the same budget vs the legacy RecallFallback block.
8. Peak RSS (VmHWM) of each service process, OpenViking and the embedding server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import httpx
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    checkpoint_pb2,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)

from shared.localstack.processes import free_port
from shared.localstack.stack import LocalStack, StackSettings
from shared.tokens import TokenCounter, ensure_offline_tiktoken
from tests.bench.traces import SpanRecord, SpanSink, client_spans, split_rpcs
from tests.bench.workload import TOPICS, Session, Turn, Workload, generate

Role = common_pb2.MessageRole
ACCOUNT = "bench"
AGENT = "main"
MODEL = "gpt-4o"
REPO = Path(__file__).resolve().parents[2]
GRPC_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
SERVICES = ("compaction", "capture", "assembly")
PENDING = checkpoint_pb2.CHECKPOINT_STATUS_PENDING
COMPLETED = checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED
FAILED = checkpoint_pb2.CHECKPOINT_STATUS_FAILED
STATUS_NAMES = {v: k.removeprefix("CHECKPOINT_STATUS_") for k, v in checkpoint_pb2.CheckpointStatus.items()}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------- measurements


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


@dataclass
class Recorder:
    """Latencies (ms) and errors per operation."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    async def time(self, op: str, call: Awaitable[Any]) -> Any:
        start = time.perf_counter()
        try:
            result = await call
        except Exception as exc:
            self.errors[op].append(_describe(exc))
            return None
        self.latencies[op].append((time.perf_counter() - start) * 1000.0)
        return result

    def summary(self) -> dict[str, dict[str, Any]]:
        ops = sorted(set(self.latencies) | set(self.errors))
        return {op: stats(self.latencies.get(op, []), self.errors.get(op, [])) for op in ops}


def stats(values: list[float], errors: list[str] | None = None) -> dict[str, Any]:
    errors = errors or []
    out: dict[str, Any] = {
        "count": len(values),
        "errors": len(errors),
        "p50_ms": _r(percentile(values, 50)),
        "p95_ms": _r(percentile(values, 95)),
        "p99_ms": _r(percentile(values, 99)),
        "mean_ms": _r(sum(values) / len(values)) if values else None,
    }
    if errors:
        out["error_samples"] = sorted(set(errors))[:3]
    return out


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {(exc.details() or '')[:200]}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


# --------------------------------------------------------------------------- messages


def identity(user_id: str, session_id: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user_id, agent_id=AGENT, session_id=session_id)


def text_message(role: int, text: str, msg_id: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=msg_id, role=role, content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))]
    )


def turn_messages(
    turn: Turn, prefix: str
) -> tuple[common_pb2.ConversationMessage, list[common_pb2.ConversationMessage]]:
    """The user message, then the rest of the turn (tool call, tool result, assistant answer)."""
    user = text_message(Role.MESSAGE_ROLE_USER, turn.user, f"{prefix}-{turn.index}-u")
    rest: list[common_pb2.ConversationMessage] = []
    if turn.tool is not None:
        call = common_pb2.ToolCallBlock(
            id=turn.tool.call_id,
            name=turn.tool.name,
            arguments=common_pb2.JsonValue(json=json.dumps(turn.tool.arguments)),
        )
        rest.append(
            common_pb2.ConversationMessage(
                id=f"{prefix}-{turn.index}-c",
                role=Role.MESSAGE_ROLE_ASSISTANT,
                content=[common_pb2.ContentBlock(tool_call=call)],
            )
        )
        result = common_pb2.ToolResultBlock(
            tool_call_id=turn.tool.call_id,
            tool_name=turn.tool.name,
            content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=turn.tool.output))],
        )
        rest.append(
            common_pb2.ConversationMessage(
                id=f"{prefix}-{turn.index}-t",
                role=Role.MESSAGE_ROLE_TOOL_RESULT,
                content=[common_pb2.ContentBlock(tool_result=result)],
            )
        )
    rest.append(text_message(Role.MESSAGE_ROLE_ASSISTANT, turn.assistant, f"{prefix}-{turn.index}-a"))
    return user, rest


def message_texts(message: common_pb2.ConversationMessage) -> list[str]:
    out: list[str] = []
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            out.append(block.text.text)
        elif kind == "tool_call":
            out.append(f"{block.tool_call.name} {block.tool_call.arguments.json}")
        elif kind == "tool_result":
            out.extend(c.text.text for c in block.tool_result.content if c.WhichOneof("block") == "text")
        elif kind == "thinking":
            out.append(getattr(block.thinking, "text", ""))
    return out


def turn_plain_messages(turn: Turn) -> list[str]:
    """The turn as plain message texts (for the truncation baseline and raw OpenViking calls)."""
    out = [turn.user]
    if turn.tool is not None:
        out.append(f"{turn.tool.name} {json.dumps(turn.tool.arguments)}")
        out.append(turn.tool.output)
    out.append(turn.assistant)
    return out


def truncate_newest_first(counter: TokenCounter, messages: list[str], budget: int) -> list[str]:
    kept: list[str] = []
    used = 0
    for text in reversed(messages):
        cost = counter.count_message([text])
        if used + cost > budget:
            break
        kept.append(text)
        used += cost
    return list(reversed(kept))


# --------------------------------------------------------------------------- processes


def vm_hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry.name))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def peak_rss_mb(pid: int) -> dict[str, Any]:
    """VmHWM of the process and, separately, the sum over its descendants (if any)."""
    own = vm_hwm_kb(pid)
    kids = [k for k in (vm_hwm_kb(c) for c in descendants(pid)) if k]
    return {
        "pid": pid,
        "peak_rss_mb": _r(own / 1024, 1) if own else None,
        "children_peak_rss_mb": _r(sum(kids) / 1024, 1) if kids else 0.0,
    }


@dataclass
class EngineProcess:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_engine(
    openviking_url: str, log_dir: Path, extra_env: dict[str, str], services: Sequence[str] = SERVICES
) -> dict[str, EngineProcess]:
    ports = {name: free_port() for name in services}
    env = dict(os.environ)
    env.update(
        {
            "CONTEXT_ENGINE_BASE_URL": openviking_url,
            "CONTEXT_ENGINE_COMPACTION_TARGET": f"127.0.0.1:{ports.get('compaction', 0)}",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for key in [k for k in env if k.startswith("OTEL_")]:
        env.pop(key)
    env.update(extra_env)
    procs: dict[str, EngineProcess] = {}
    for name in services:
        log_path = log_dir / f"engine-{name}-{ports[name]}.log"
        handle = log_path.open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.runtime.main", "--service", name, "--port", str(ports[name])],
            cwd=REPO,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        procs[name] = EngineProcess(name, ports[name], process, log_path)
    deadline = time.monotonic() + 90
    pending = set(procs)
    while pending:
        for name in list(pending):
            proc = procs[name]
            if proc.process.poll() is not None:
                stop_engine(procs)
                tail = proc.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"engine {name} exited with {proc.process.returncode}:\n{tail}")
            if "listening on" in proc.log_path.read_text(errors="replace"):
                pending.discard(name)
        if time.monotonic() > deadline:
            stop_engine(procs)
            raise RuntimeError(f"engine services not ready after 90 s: {sorted(pending)}")
        time.sleep(0.2)
    return procs


def stop_engine(procs: dict[str, EngineProcess]) -> None:
    for proc in procs.values():
        if proc.process.poll() is None:
            proc.process.terminate()
    for proc in procs.values():
        try:
            proc.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.process.kill()


# --------------------------------------------------------------------------- phases


@dataclass
class Stubs:
    capture: capture_pb2_grpc.CaptureServiceStub
    assembly: assembly_pb2_grpc.AssemblyServiceStub
    compaction: compaction_pb2_grpc.CompactionServiceStub


@dataclass
class TokenStats:
    assembled: list[int] = field(default_factory=list)
    transcript: list[int] = field(default_factory=list)

    def summary(self, budget: int) -> dict[str, Any]:
        if not self.assembled:
            return {}
        over = [(a, t) for a, t in zip(self.assembled, self.transcript, strict=True) if t > budget]
        ratios = [a / t for a, t in zip(self.assembled, self.transcript, strict=True) if t]
        return {
            "turns": len(self.assembled),
            "assembled_tokens_mean": _r(sum(self.assembled) / len(self.assembled), 1),
            "assembled_tokens_p95": _r(percentile([float(a) for a in self.assembled], 95), 1),
            "transcript_tokens_mean": _r(sum(self.transcript) / len(self.transcript), 1),
            "transcript_tokens_max": max(self.transcript),
            "assembled_over_transcript_mean": _r(sum(ratios) / len(ratios), 3) if ratios else None,
            "turns_transcript_over_budget": len(over),
            "over_budget_assembled_tokens_mean": _r(sum(a for a, _ in over) / len(over), 1) if over else None,
            "over_budget_transcript_tokens_mean": _r(sum(t for _, t in over) / len(over), 1)
            if over
            else None,
        }


async def replay_session(
    stubs: Stubs,
    session: Session,
    session_id: str,
    budget: int,
    rec: Recorder,
    counter: TokenCounter,
    tokens: TokenStats | None,
    rpc_timeout: float,
    stop_at: float,
) -> int:
    ident = identity(session.user_id, session_id)
    transcript: list[common_pb2.ConversationMessage] = []
    transcript_tokens = 0
    done = 0
    for turn in session.turns:
        if time.monotonic() > stop_at:
            break
        before = len(transcript)
        user, rest = turn_messages(turn, session_id)
        transcript.append(user)
        transcript_tokens += counter.count_message(message_texts(user))
        assembled = await rec.time(
            "Assemble",
            stubs.assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=ident, messages=transcript, token_budget=budget, model=MODEL, prompt=turn.user
                ),
                timeout=rpc_timeout,
            ),
        )
        if assembled is not None and tokens is not None:
            own = sum(counter.count_message(message_texts(m)) for m in assembled.messages)
            own += counter.count(assembled.system_prompt_addition)
            tokens.assembled.append(own)
            tokens.transcript.append(transcript_tokens)
        transcript.extend(rest)
        transcript_tokens += sum(counter.count_message(message_texts(m)) for m in rest)
        await rec.time(
            "AfterTurn",
            stubs.capture.AfterTurn(
                capture_pb2.AfterTurnRequest(
                    identity=ident,
                    messages=transcript,
                    pre_prompt_message_count=before,
                    token_budget=budget,
                    model=MODEL,
                ),
                timeout=rpc_timeout,
            ),
        )
        done += 1
    return done


async def run_pool(
    items: list[Any], concurrency: int, worker: Callable[[Any], Awaitable[int]]
) -> tuple[int, float]:
    """Run `worker` over `items` with at most `concurrency` in flight; (units done, wall seconds)."""
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in items:
        queue.put_nowait(item)
    total = 0

    async def loop() -> None:
        nonlocal total
        while True:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            done = await worker(item)
            total += done

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return total, time.perf_counter() - start


async def phase_concurrency(
    stubs: Stubs, workload: Workload, level: int, args: argparse.Namespace, counter: TokenCounter
) -> tuple[dict[str, Any], TokenStats]:
    rec = Recorder()
    tokens = TokenStats()
    stop_at = time.monotonic() + args.level_seconds

    async def worker(session: Session) -> int:
        return await replay_session(
            stubs,
            session,
            f"c{level}-{session.session_id}",
            args.budget,
            rec,
            counter,
            tokens,
            args.rpc_timeout,
            stop_at,
        )

    turns, wall = await run_pool(workload.sessions, level, worker)
    rpcs = sum(len(v) for v in rec.latencies.values())
    result = {
        "concurrency": level,
        "turns": turns,
        "wall_s": _r(wall),
        "turns_per_s": _r(turns / wall if wall else 0.0),
        "rpcs_per_s": _r(rpcs / wall if wall else 0.0),
        "capped": time.monotonic() > stop_at,
        "ops": rec.summary(),
        "tokens": tokens.summary(args.budget),
    }
    return result, tokens


def ov_headers(user_id: str) -> dict[str, str]:
    return {"X-OpenViking-Account": ACCOUNT, "X-OpenViking-User": user_id}


def ov_message_body(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "text": text}]}


async def ov_call(http: httpx.AsyncClient, method: str, path: str, user_id: str, **kwargs: Any) -> Any:
    """One OpenViking call; a 404 counts as answered (context of a session that has no messages yet)."""
    response = await http.request(method, path, headers=ov_headers(user_id), **kwargs)
    if response.status_code >= 400 and response.status_code != 404:
        raise RuntimeError(f"HTTP {response.status_code} {path}: {response.text[:200]}")
    return response.json()


async def phase_openviking_raw(
    http: httpx.AsyncClient, workload: Workload, level: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The OpenViking calls behind a turn, made directly: what OpenViking alone costs."""
    rec = Recorder()
    stop_at = time.monotonic() + args.level_seconds / 3

    async def worker(session: Session) -> int:
        session_id = f"raw{level}-{session.session_id}"
        user = session.user_id
        done = 0
        for turn in session.turns:
            if time.monotonic() > stop_at:
                break
            texts = turn_plain_messages(turn)
            query = turn.user[:400]
            start = time.perf_counter()
            await asyncio.gather(
                rec.time(
                    "ov.find",
                    ov_call(
                        http,
                        "POST",
                        "/api/v1/search/find",
                        user,
                        json={
                            "query": query,
                            "target_uri": "viking://~/memories",
                            "limit": 12,
                            "score_threshold": 0.0,
                        },
                    ),
                ),
                rec.time(
                    "ov.find",
                    ov_call(
                        http,
                        "POST",
                        "/api/v1/search/find",
                        user,
                        json={
                            "query": query,
                            "target_uri": "viking://~/memories",
                            "limit": 12,
                            "score_threshold": 0.0,
                            "tags": [f"agent={AGENT}"],
                        },
                    ),
                ),
                rec.time(
                    "ov.session_context",
                    ov_call(
                        http,
                        "GET",
                        f"/api/v1/sessions/{session_id}/context",
                        user,
                        params={"token_budget": args.budget},
                    ),
                ),
            )
            rec.latencies["ov.assemble_equivalent"].append((time.perf_counter() - start) * 1000.0)
            roles = ["user"] + ["assistant"] * (len(texts) - 1)
            await rec.time(
                "ov.add_messages_batch",
                ov_call(
                    http,
                    "POST",
                    f"/api/v1/sessions/{session_id}/messages/batch",
                    user,
                    json={"messages": [ov_message_body(r, t) for r, t in zip(roles, texts, strict=True)]},
                ),
            )
            done += 1
        return done

    turns, wall = await run_pool(workload.sessions, level, worker)
    return {
        "concurrency": level,
        "turns": turns,
        "wall_s": _r(wall),
        "turns_per_s": _r(turns / wall if wall else 0.0),
        "ops": rec.summary(),
    }


async def ingest_session(
    stubs: Stubs, session: Session, session_id: str, rec: Recorder, timeout: float, batch_size: int = 80
) -> None:
    ident = identity(session.user_id, session_id)
    batch: list[common_pb2.ConversationMessage] = []
    for turn in session.turns:
        user, rest = turn_messages(turn, session_id)
        batch.extend([user, *rest])
        if len(batch) >= batch_size:
            await rec.time(
                "Ingest",
                stubs.capture.Ingest(
                    capture_pb2.IngestRequest(identity=ident, messages=batch), timeout=timeout
                ),
            )
            batch = []
    if batch:
        await rec.time(
            "Ingest",
            stubs.capture.Ingest(capture_pb2.IngestRequest(identity=ident, messages=batch), timeout=timeout),
        )


@dataclass
class SpanWindows:
    """Named time windows whose RPC spans are looked at after the run (spans arrive late)."""

    phases: list[tuple[str, int, int]] = field(default_factory=list)
    """(phase, start ns, end ns) for the engine-own vs OpenViking split."""
    routes: list[tuple[str, str, int, int]] = field(default_factory=list)
    """(label, RPC method, start ns, end ns) for the OpenViking calls inside those RPCs."""


async def compact_once(
    stubs: Stubs,
    rec: Recorder,
    spans: SpanWindows,
    user_id: str,
    session_id: str,
    budget: int,
    op: str,
    *,
    background: bool = False,
    completion_timeout: float = 300,
) -> dict[str, Any]:
    """One forced Compact; with `background`, then poll GetCheckpoint until it is no longer PENDING."""
    ident = identity(user_id, session_id)
    window_start = time.time_ns()
    start = time.perf_counter()
    compacted = await rec.time(
        op,
        stubs.compaction.Compact(
            compaction_pb2.CompactRequest(
                identity=ident, token_budget=budget, force=True, model=MODEL, background=background
            ),
            timeout=300,
        ),
    )
    rpc_ms = (time.perf_counter() - start) * 1000
    spans.routes.append((f"{op}:{session_id}", "Compact", window_start, time.time_ns()))
    out: dict[str, Any] = {
        "session_id": session_id,
        "op": op,
        "background": background,
        "compact_ms": _r(rpc_ms),
        "span_label": f"{op}:{session_id}",
    }
    if compacted is None:
        out["compact_error"] = rec.errors[op][-1]
        return out
    checkpoint = compacted.checkpoint
    out.update(
        compacted=compacted.compacted,
        reason=compacted.reason,
        tokens_before=compacted.tokens_before,
        tokens_after=compacted.tokens_after,
        checkpoint_id=checkpoint.checkpoint_id,
        archive_uri=checkpoint.archive_uri,
    )
    if background and checkpoint.checkpoint_id:
        status = checkpoint.status
        deadline = time.monotonic() + completion_timeout
        polls = 0
        while status == PENDING and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            polls += 1
            try:
                got = await stubs.compaction.GetCheckpoint(
                    compaction_pb2.GetCheckpointRequest(
                        identity=ident, checkpoint_id=checkpoint.checkpoint_id
                    ),
                    timeout=30,
                )
            except grpc.aio.AioRpcError as exc:
                out["poll_error"] = _describe(exc)
                continue
            status = got.checkpoint.status
            if got.checkpoint.archive_uri:
                out["archive_uri"] = got.checkpoint.archive_uri
            if status == FAILED:
                out["failure_reason"] = got.checkpoint.failure_reason
        out["status"] = STATUS_NAMES.get(status, str(status))
        out["polls"] = polls
        if status == COMPLETED:
            out["to_completed_ms"] = _r((time.perf_counter() - start) * 1000)
    else:
        out["status"] = STATUS_NAMES.get(checkpoint.status, str(checkpoint.status))
        if checkpoint.status == COMPLETED:
            out["to_completed_ms"] = out["compact_ms"]
    return out


def expand_queries(session: Session, rng_seed: int, n: int) -> list[str]:
    """`n` queries from a session's own turns (user text snippets, tool names, planted question)."""
    rng = random.Random(rng_seed)
    out: list[str] = []
    for _ in range(n):
        turn = rng.choice(session.turns)
        words = turn.user.split()
        k = rng.randint(3, 10)
        pos = rng.randint(0, max(0, len(words) - k))
        out.append(" ".join(words[pos : pos + k]))
    if session.fact is not None and out:
        out[0] = session.fact.question
    return out


async def phase_compaction(
    stubs: Stubs, workload: Workload, args: argparse.Namespace, spans: SpanWindows
) -> dict[str, Any]:
    rec = Recorder()
    details: list[dict[str, Any]] = []
    targets: list[tuple[str, str, Session]] = []  # (user, session id, session) with an archive to expand
    # Sessions replayed at concurrency 1 (already captured turn by turn).
    for session in workload.sessions[: args.compact_sessions]:
        detail = await compact_once(
            stubs, rec, spans, session.user_id, f"c1-{session.session_id}", args.budget, "Compact"
        )
        details.append(detail)
        if detail.get("archive_uri") or detail.get("checkpoint_id"):
            targets.append((session.user_id, f"c1-{session.session_id}", session))
    # Long sessions ingested in big batches, then compacted: one twin synchronously (Compact latency,
    # OpenViking's commit call inside it) and one with background=true (phase-1 latency, then
    # GetCheckpoint polled until COMPLETED).
    sizes: list[dict[str, Any]] = []
    for size in args.compact_turns:
        big = generate(1, size, args.seed + size, prefix=f"big{size}-").sessions[0]
        sync_id, bg_id = f"big{size}-{args.seed}", f"big{size}bg-{args.seed}"
        ingest_start = time.perf_counter()
        await asyncio.gather(
            ingest_session(stubs, big, sync_id, rec, 300, args.ingest_batch),
            ingest_session(stubs, big, bg_id, rec, 300, args.ingest_batch),
        )
        ingest_s = time.perf_counter() - ingest_start
        sync = await compact_once(
            stubs, rec, spans, big.user_id, sync_id, args.budget, f"Compact@{size}turns"
        )
        bg = await compact_once(
            stubs,
            rec,
            spans,
            big.user_id,
            bg_id,
            args.budget,
            f"Compact(background)@{size}turns",
            background=True,
        )
        for d in (sync, bg):
            d["turns"] = size
            details.append(d)
        sizes.append({"turns": size, "ingest_both_s": _r(ingest_s), "sync": sync, "background": bg})
        targets += [(big.user_id, sync_id, big), (big.user_id, bg_id, big)]
    # ExpandMemory over every compacted session, varied queries and limits.
    by_session = {d["session_id"]: d for d in details}
    usable = [
        t for t in targets if by_session[t[1]].get("archive_uri") or by_session[t[1]].get("checkpoint_id")
    ]
    expand_window = time.time_ns()
    expanded_turns: list[int] = []
    if usable:
        per = max(1, -(-args.expand_calls // len(usable)))
        calls = 0
        for round_ in range(per):
            for user_id, session_id, session in usable:
                if calls >= args.expand_calls:
                    break
                d = by_session[session_id]
                uri = d.get("archive_uri") or d["checkpoint_id"]
                query = expand_queries(session, args.seed + round_, per)[round_]
                limit = (2, 4, 6)[calls % 3]  # the API allows 1..6
                got = await rec.time(
                    "ExpandMemory",
                    stubs.compaction.ExpandMemory(
                        compaction_pb2.ExpandMemoryRequest(
                            identity=identity(user_id, session_id),
                            summary_or_memory_uri=uri,
                            query=query,
                            limit=limit,
                        ),
                        timeout=60,
                    ),
                )
                if got is not None:
                    expanded_turns.append(len(got.turns))
                calls += 1
    spans.routes.append(("ExpandMemory", "ExpandMemory", expand_window, time.time_ns()))
    return {
        "ops": rec.summary(),
        "sessions": details,
        "sizes": sizes,
        "expand": {
            "calls": len(expanded_turns),
            "sessions": len(usable),
            "turns_returned_mean": _r(sum(expanded_turns) / len(expanded_turns), 1)
            if expanded_turns
            else None,
        },
    }


MEMORY_USER = "bench-asm-user"


def memory_texts(count: int, seed: int) -> list[str]:
    """`count` distinct short memories (a preference/decision/fact over the workload's topics)."""
    rng = random.Random(seed)
    kinds = ("prefers", "decided to use", "always checks", "avoids", "keeps notes on", "wants")
    out: list[str] = []
    for i in range(count):
        topic = rng.choice(list(TOPICS))
        words = rng.sample(TOPICS[topic], 4)
        out.append(
            f"Memory {i:04d} about {topic}: the user {rng.choice(kinds)} {words[0]} with {words[1]} "
            f"for {words[2]} ({words[3]}, ref mem-{seed}-{i:04d})."
        )
    return out


async def seed_memories(http: httpx.AsyncClient, user_id: str, args: argparse.Namespace) -> dict[str, Any]:
    """`content/write` with wait=false, `args.memory_write_concurrency` in flight; then poll `search/find`
    until sampled memories (the last ones written, and a spread) are findable."""
    texts = memory_texts(args.memories, args.seed)
    uris = [f"viking://~/memories/notes/bench-mem-{i:04d}.md" for i in range(len(texts))]
    tags = ["source=memory_store", f"agent={AGENT}", "category=notes"]
    rec = Recorder()
    start = time.perf_counter()

    async def write(i: int) -> int:
        await rec.time(
            "ov.content_write(wait=false)",
            ov_call(
                http,
                "POST",
                "/api/v1/content/write",
                user_id,
                json={"uri": uris[i], "content": texts[i], "mode": "replace", "wait": False, "tags": tags},
            ),
        )
        return 1

    await run_pool(list(range(len(texts))), args.memory_write_concurrency, write)
    written_s = time.perf_counter() - start
    sample = sorted({len(texts) - 1, len(texts) - 2, len(texts) - 3, len(texts) // 2, 0})
    pending = {i for i in sample if 0 <= i < len(texts)}
    deadline = time.monotonic() + args.memory_index_timeout
    while pending and time.monotonic() < deadline:
        for i in sorted(pending):
            found = await ov_call(
                http,
                "POST",
                "/api/v1/search/find",
                user_id,
                json={
                    "query": texts[i],
                    "target_uri": "viking://~/memories",
                    "limit": 5,
                    "score_threshold": 0.0,
                },
            )
            hits = json.dumps(found)
            if f"bench-mem-{i:04d}" in hits:
                pending.discard(i)
        if pending:
            await asyncio.sleep(0.5)
    return {
        "memories": len(texts),
        "write_s": _r(written_s),
        "findable_after_s": _r(time.perf_counter() - start),
        "embeddings_per_s": _r(len(texts) / (time.perf_counter() - start)),
        "not_findable_samples": sorted(pending),
        "ops": rec.summary(),
    }


async def phase_assembly(
    stubs: Stubs,
    http: httpx.AsyncClient,
    args: argparse.Namespace,
    counter: TokenCounter,
    spans: SpanWindows,
) -> dict[str, Any]:
    """Assemble against 1k memories and a persisted 500-turn session, at several concurrencies."""
    out: dict[str, Any] = {"budget": args.assembly_budget}
    log(f"  seeding {args.memories} memories for {MEMORY_USER}")
    out["seed"] = await seed_memories(http, MEMORY_USER, args)
    log(f"  {out['seed']['memories']} memories findable after {out['seed']['findable_after_s']} s")
    session = generate(1, args.assembly_turns, args.seed + 3, prefix="asm-").sessions[0]
    session = replace(session, user_id=MEMORY_USER)
    session_id = f"asm-{args.seed}"
    rec = Recorder()
    start = time.perf_counter()
    await ingest_session(stubs, session, session_id, rec, 300, args.ingest_batch)
    out["ingest"] = {"turns": len(session.turns), "seconds": _r(time.perf_counter() - start), **rec.summary()}
    transcript: list[common_pb2.ConversationMessage] = []
    for turn in session.turns:
        user, rest = turn_messages(turn, session_id)
        transcript.extend([user, *rest])
    transcript_tokens = sum(counter.count_message(message_texts(m)) for m in transcript)
    prompts = expand_queries(session, args.seed, 16)
    levels: list[dict[str, Any]] = []
    assembled_by_level: dict[int, list[int]] = defaultdict(list)
    prompt_by_level: dict[int, list[int]] = defaultdict(list)
    for level, calls in zip(args.concurrency, args.assembly_calls, strict=False):
        rec = Recorder()
        assembled_tokens = assembled_by_level[level]
        prompt_tokens = prompt_by_level[level]
        stop_at = time.monotonic() + args.assembly_level_seconds

        async def call(i: int, level: int = level, rec: Recorder = rec, stop_at: float = stop_at) -> int:
            if time.monotonic() > stop_at:
                return 0
            prompt = f"About {prompts[i % len(prompts)]} - what did we settle on?"
            question = text_message(Role.MESSAGE_ROLE_USER, prompt, f"{session_id}-q{level}-{i}")
            got = await rec.time(
                "Assemble",
                stubs.assembly.Assemble(
                    assembly_pb2.AssembleRequest(
                        identity=identity(MEMORY_USER, session_id),
                        messages=[*transcript, question],
                        token_budget=args.assembly_budget,
                        model=MODEL,
                        prompt=prompt,
                    ),
                    timeout=args.rpc_timeout,
                ),
            )
            if got is not None:
                own = sum(counter.count_message(message_texts(m)) for m in got.messages)
                assembled_by_level[level].append(own + counter.count(got.system_prompt_addition))
                prompt_by_level[level].append(counter.count_message([prompt]))
            return 1

        log(f"  Assemble ×{calls} at concurrency {level}")
        window_start = time.time_ns()
        done, wall = await run_pool(list(range(calls)), level, call)
        window_end = time.time_ns()
        spans.phases.append((f"assembly@{level}", window_start, window_end))
        spans.routes.append((f"assembly@{level}", "Assemble", window_start, window_end))
        levels.append(
            {
                "concurrency": level,
                "calls": done,
                "capped": done < calls,
                "wall_s": _r(wall),
                "calls_per_s": _r(done / wall if wall else 0.0),
                "ops": rec.summary(),
                "assembled_tokens_mean": _r(sum(assembled_tokens) / len(assembled_tokens), 1)
                if assembled_tokens
                else None,
                "assembled_tokens_max": max(assembled_tokens) if assembled_tokens else None,
                "transcript_tokens": transcript_tokens
                + (round(sum(prompt_tokens) / len(prompt_tokens)) if prompt_tokens else 0),
            }
        )
    out["transcript_messages"] = len(transcript) + 1
    out["transcript_tokens"] = transcript_tokens
    out["levels"] = levels
    return out


def shortened(session: Session, tool_chars: int) -> Session:
    """The session with tool results cut to `tool_chars` characters (cheaper long sessions)."""
    if tool_chars <= 0:
        return session
    turns = [
        replace(t, tool=replace(t.tool, output=t.tool.output[:tool_chars])) if t.tool is not None else t
        for t in session.turns
    ]
    return replace(session, turns=turns)


def growth_session(args: argparse.Namespace) -> Session:
    session = generate(1, args.growth_turns, args.seed + 1, prefix="grow-").sessions[0]
    return shortened(session, args.growth_tool_chars)


def range_stats(points: list[tuple[int, float]], first: int, last: int) -> dict[str, Any]:
    """Latency stats over the points whose turn number is in [first, last]."""
    chosen = [ms for turn, ms in points if first <= turn <= last]
    out = stats(chosen)
    out["turns"] = f"{first}-{last}"
    return out


def early_late(points: list[tuple[int, float]], window: int = 100) -> dict[str, Any]:
    """Stats at turns 1..window and at the last `window` turns done (900-1000 of 1,000)."""
    if not points:
        return {}
    top = max(turn for turn, _ in points)
    return {
        "early": range_stats(points, 1, window),
        "late": range_stats(points, max(1, top - window + 1), top),
    }


async def phase_growth(stubs: Stubs, args: argparse.Namespace, counter: TokenCounter) -> dict[str, Any]:
    """One session growing turn by turn; AfterTurn latency per turn index."""
    if args.growth_turns <= 0:
        return {}
    session = growth_session(args)
    session_id = f"grow-{args.seed}"
    ident = identity(session.user_id, session_id)
    transcript: list[common_pb2.ConversationMessage] = []
    points: list[tuple[int, float, int]] = []
    errors: list[str] = []
    tokens = 0
    stop_at = time.monotonic() + args.growth_seconds
    wall_start = time.perf_counter()
    for turn in session.turns:
        if time.monotonic() > stop_at:
            break
        before = len(transcript)
        user, rest = turn_messages(turn, session_id)
        transcript.extend([user, *rest])
        tokens += sum(counter.count_message(message_texts(m)) for m in (user, *rest))
        start = time.perf_counter()
        try:
            await stubs.capture.AfterTurn(
                capture_pb2.AfterTurnRequest(
                    identity=ident,
                    messages=transcript,
                    pre_prompt_message_count=before,
                    token_budget=args.growth_budget,
                    model=MODEL,
                ),
                timeout=args.rpc_timeout,
            )
        except grpc.aio.AioRpcError as exc:
            errors.append(_describe(exc))
            continue
        points.append((turn.index + 1, (time.perf_counter() - start) * 1000.0, tokens))
    wall = time.perf_counter() - wall_start
    values = [p[1] for p in points]
    deciles: list[dict[str, Any]] = []
    if points:
        step = max(1, len(points) // 10)
        for i in range(0, len(points), step):
            chunk = points[i : i + step]
            deciles.append(
                {
                    "turns": f"{chunk[0][0]}-{chunk[-1][0]}",
                    "p50_ms": _r(percentile([c[1] for c in chunk], 50)),
                    "p99_ms": _r(percentile([c[1] for c in chunk], 99)),
                    "transcript_tokens": chunk[-1][2],
                }
            )
    done = len(points) + len(errors)
    return {
        "requested_turns": args.growth_turns,
        "tool_result_chars_max": args.growth_tool_chars,
        "turns_done": len(points),
        "capped": done < args.growth_turns,
        "wall_s": _r(wall),
        "turns_per_s": _r(done / wall if wall else 0.0),
        "transcript_tokens": tokens,
        "afterturn": stats(values, errors),
        "early_late": early_late([(p[0], p[1]) for p in points]),
        "by_turn_range": deciles,
        "points": [[p[0], _r(p[1]), p[2]] for p in points],
    }


async def phase_growth_raw(http: httpx.AsyncClient, args: argparse.Namespace) -> dict[str, Any]:
    """The same growing session straight into OpenViking: `POST sessions/{id}/messages`, one message
    per call, each turn's messages in order. Per-turn time = the sum of its calls."""
    if args.growth_turns <= 0:
        return {}
    session = growth_session(args)
    session_id = f"rawgrow-{args.seed}"
    rec = Recorder()
    per_turn: list[tuple[int, float]] = []
    single: list[tuple[int, float]] = []
    stop_at = time.monotonic() + args.growth_seconds
    wall_start = time.perf_counter()
    for turn in session.turns:
        if time.monotonic() > stop_at:
            break
        texts = turn_plain_messages(turn)
        roles = ["user"] + ["assistant"] * (len(texts) - 1)
        turn_ms = 0.0
        ok = True
        for role, text in zip(roles, texts, strict=True):
            start = time.perf_counter()
            answered = await rec.time(
                "ov.add_message",
                ov_call(
                    http,
                    "POST",
                    f"/api/v1/sessions/{session_id}/messages",
                    session.user_id,
                    json=ov_message_body(role, text),
                ),
            )
            ms = (time.perf_counter() - start) * 1000.0
            if answered is None:
                ok = False
                continue
            turn_ms += ms
            single.append((turn.index + 1, ms))
        if ok:
            per_turn.append((turn.index + 1, turn_ms))
            rec.latencies["ov.turn_append"].append(turn_ms)
    wall = time.perf_counter() - wall_start
    return {
        "session_id": session_id,
        "turns_done": len(per_turn),
        "capped": len(per_turn) < args.growth_turns,
        "wall_s": _r(wall),
        "turns_per_s": _r(len(per_turn) / wall if wall else 0.0),
        "ops": rec.summary(),
        "add_message_early_late": early_late(single),
        "turn_append_early_late": early_late(per_turn),
    }


def assembled_text(response: assembly_pb2.AssembleResponse) -> str:
    parts = [response.system_prompt_addition]
    for message in response.messages:
        parts.extend(message_texts(message))
    return "\n".join(parts)


async def phase_recall(
    stubs: Stubs, workload: Workload, args: argparse.Namespace, counter: TokenCounter
) -> dict[str, Any]:
    rec = Recorder()
    by_session = {s.session_id: s for s in workload.sessions}
    user_history: dict[str, list[str]] = defaultdict(list)
    for session in workload.sessions:
        for turn in session.turns:
            user_history[session.user_id].extend(turn_plain_messages(turn))
    methods = (
        "engine_new_session",
        "engine_same_session",
        "truncated_same_session",
        "truncated_all_sessions",
        "legacy_recall_fallback",
    )
    rows: list[dict[str, Any]] = []
    for fact in workload.facts:
        session = by_session[fact.session_id]
        needle = fact.needle.lower()
        row: dict[str, Any] = {
            "fact": fact.fact_id,
            "stored": fact.stored,
            "kind": fact.kind,
            "planted_turn": fact.turn_index,
            "turns": len(session.turns),
        }
        probe_id = f"probe-{fact.session_id}"
        question = text_message(Role.MESSAGE_ROLE_USER, fact.question, f"{probe_id}-q")
        fresh = await rec.time(
            "Assemble(probe,new session)",
            stubs.assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=identity(fact.user_id, probe_id),
                    messages=[question],
                    token_budget=args.budget,
                    model=MODEL,
                    prompt=fact.question,
                ),
                timeout=args.rpc_timeout,
            ),
        )
        row["engine_new_session"] = None if fresh is None else needle in assembled_text(fresh).lower()
        transcript: list[common_pb2.ConversationMessage] = []
        for turn in session.turns:
            user, rest = turn_messages(turn, f"c1-{session.session_id}")
            transcript.extend([user, *rest])
        transcript.append(
            text_message(Role.MESSAGE_ROLE_USER, fact.question, f"c1-{session.session_id}-probe")
        )
        same = await rec.time(
            "Assemble(probe,same session)",
            stubs.assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=identity(fact.user_id, f"c1-{session.session_id}"),
                    messages=transcript,
                    token_budget=args.budget,
                    model=MODEL,
                    prompt=fact.question,
                ),
                timeout=args.rpc_timeout,
            ),
        )
        row["engine_same_session"] = None if same is None else needle in assembled_text(same).lower()
        own = [t for turn in session.turns for t in turn_plain_messages(turn)] + [fact.question]
        row["truncated_same_session"] = (
            needle in "\n".join(truncate_newest_first(counter, own, args.budget)).lower()
        )
        everything = user_history[fact.user_id] + [fact.question]
        row["truncated_all_sessions"] = (
            needle in "\n".join(truncate_newest_first(counter, everything, args.budget)).lower()
        )
        legacy = await rec.time(
            "RecallFallback",
            stubs.assembly.RecallFallback(
                assembly_pb2.RecallFallbackRequest(
                    identity=identity(fact.user_id, probe_id), prompt=fact.question
                ),
                timeout=args.rpc_timeout,
            ),
        )
        row["legacy_recall_fallback"] = None if legacy is None else needle in legacy.prepend_context.lower()
        rows.append(row)

    def rate(method: str, subset: Iterable[dict[str, Any]]) -> dict[str, Any]:
        values = [r[method] for r in subset if r[method] is not None]
        return {
            "hits": sum(values),
            "n": len(values),
            "rate": _r(sum(values) / len(values), 3) if values else None,
        }

    summary = {
        method: {
            "all": rate(method, rows),
            "stored": rate(method, [r for r in rows if r["stored"]]),
            "conversation_only": rate(method, [r for r in rows if not r["stored"]]),
        }
        for method in methods
    }
    return {"hit_rate": summary, "ops": rec.summary(), "probes": rows}


async def store_facts(stubs: Stubs, workload: Workload, args: argparse.Namespace) -> dict[str, Any]:
    rec = Recorder()
    for fact in workload.facts:
        if fact.stored:
            await rec.time(
                "StoreMemory",
                stubs.capture.StoreMemory(
                    capture_pb2.StoreMemoryRequest(
                        identity=identity(fact.user_id, f"c1-{fact.session_id}"), text=fact.memory_text
                    ),
                    timeout=args.rpc_timeout,
                ),
            )
    return {"ops": rec.summary()}


# --------------------------------------------------------------------------- report


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


def fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def summary_table(report: dict[str, Any]) -> str:
    lines = [
        "| op | conc | n | err | p50 ms | p95 ms | p99 ms | OpenViking-only p50 ms "
        "| engine overhead p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    raw = {r["concurrency"]: r for r in report.get("openviking_raw", [])}
    for level in report.get("concurrency", []):
        c = level["concurrency"]
        raw_ops = raw.get(c, {}).get("ops", {})
        for op, equiv in (("Assemble", "ov.assemble_equivalent"), ("AfterTurn", "ov.add_messages_batch")):
            s = level["ops"].get(op)
            if not s:
                continue
            ov = raw_ops.get(equiv, {}).get("p50_ms")
            overhead = s["p50_ms"] - ov if s["p50_ms"] is not None and ov is not None else None
            lines.append(
                f"| {op} | {c} | {s['count']} | {s['errors']} | {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | "
                f"{fmt(s['p99_ms'])} | {fmt(ov)} | {fmt(overhead)} |"
            )
    for op, s in report.get("compaction", {}).get("ops", {}).items():
        lines.append(
            f"| {op} | 1 | {s['count']} | {s['errors']} | {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | "
            f"{fmt(s['p99_ms'])} | — | — |"
        )
    growth = report.get("growth", {})
    if growth.get("afterturn"):
        s = growth["afterturn"]
        lines.append(
            f"| AfterTurn (1 session, {growth['turns_done']} turns) | 1 | {s['count']} | {s['errors']} | "
            f"{fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | {fmt(s['p99_ms'])} | — | — |"
        )
    out = ["\n".join(lines), ""]
    out.append(
        "| concurrency | turns | wall s | turns/s | RPC/s | OpenViking-only turns/s | assembled tok/turn | "
        "transcript tok/turn | assembled/transcript | turns over budget: assembled / transcript tok |"
    )
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for level in report.get("concurrency", []):
        t = level.get("tokens", {})
        rawl = raw.get(level["concurrency"], {})
        out.append(
            f"| {level['concurrency']} | {level['turns']} | {fmt(level['wall_s'])} "
            f"| {fmt(level['turns_per_s'])} | {fmt(level['rpcs_per_s'])} | {fmt(rawl.get('turns_per_s'))} "
            f"| {fmt(t.get('assembled_tokens_mean'))} | "
            f"{fmt(t.get('transcript_tokens_mean'))} | {fmt(t.get('assembled_over_transcript_mean'))} | "
            f"{t.get('turns_transcript_over_budget', 0)}: "
            f"{fmt(t.get('over_budget_assembled_tokens_mean'))} / "
            f"{fmt(t.get('over_budget_transcript_tokens_mean'))} |"
        )
    out += growth_table(report) + assembly_tables(report) + compaction_table(report)
    wrapped = report.get("wrapped", [])
    if wrapped:
        out += [
            "",
            "| engine spans: phase | RPC | n | server p50 ms | of which OpenViking p50 ms "
            "| engine own p50 ms | engine own p95 ms | OpenViking calls/RPC |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for w in wrapped:
            out.append(
                f"| {w['phase']} | {w['method']} | {w['count']} | {fmt(w['server_p50_ms'])} "
                f"| {fmt(w['openviking_p50_ms'])} | {fmt(w['engine_own_p50_ms'])} "
                f"| {fmt(w['engine_own_p95_ms'])} | {fmt(w['openviking_calls_mean'])} |"
            )
    recall = report.get("recall", {}).get("hit_rate", {})
    if recall:
        out += [
            "",
            "| planted-fact hit rate | all | stored with StoreMemory | only said in conversation |",
            "|---|---:|---:|---:|",
        ]
        for method, parts in recall.items():
            cells = [
                f"{fmt(parts[k]['rate'])} ({parts[k]['hits']}/{parts[k]['n']})"
                if parts[k]["rate"] is not None
                else "—"
                for k in ("all", "stored", "conversation_only")
            ]
            out.append(f"| {method} | " + " | ".join(cells) + " |")
    rss = report.get("peak_rss", {})
    if rss:
        out += ["", "| process | peak RSS MB (VmHWM) | children peak RSS MB |", "|---|---:|---:|"]
        for name, r in rss.items():
            out.append(f"| {name} | {fmt(r.get('peak_rss_mb'))} | {fmt(r.get('children_peak_rss_mb'))} |")
    return "\n".join(out)


def _pp(s: dict[str, Any] | None) -> str:
    """ "p50 / p99" of a stats dict."""
    if not s or s.get("p50_ms") is None:
        return "—"
    return f"{fmt(s['p50_ms'])} / {fmt(s['p99_ms'])}"


def growth_table(report: dict[str, Any]) -> list[str]:
    growth, raw = report.get("growth", {}), report.get("growth_raw", {})
    if not growth:
        return []
    el = growth.get("early_late", {})
    early = el.get("early", {}).get("turns", "first 100")
    late = el.get("late", {}).get("turns", "last 100")
    lines = [
        "",
        f"| capture: one session grown to {growth['turns_done']} turns "
        f"({growth['transcript_tokens']} tokens) | calls | err | wall s | turns/s | p50 ms | p95 ms | p99 ms "
        f"| turns {early} p50 / p99 ms | turns {late} p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    s = growth["afterturn"]
    lines.append(
        f"| engine AfterTurn (whole transcript sent, 1 replica each) | {s['count']} | {s['errors']} "
        f"| {fmt(growth['wall_s'])} | {fmt(growth['turns_per_s'])} | {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} "
        f"| {fmt(s['p99_ms'])} | {_pp(el.get('early'))} | {_pp(el.get('late'))} |"
    )
    if raw:
        for op, label, key in (
            ("ov.add_message", "OpenViking add-message (httpx, 1 message/call)", "add_message_early_late"),
            (
                "ov.turn_append",
                "OpenViking per turn (sum of its add-message calls)",
                "turn_append_early_late",
            ),
        ):
            r = raw["ops"].get(op)
            if not r:
                continue
            rel = raw.get(key, {})
            per_s = raw["turns_per_s"] if op == "ov.turn_append" else None
            lines.append(
                f"| {label} | {r['count']} | {r['errors']} | {fmt(raw['wall_s']) if per_s else '—'} "
                f"| {fmt(per_s)} | {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | {fmt(r['p99_ms'])} "
                f"| {_pp(rel.get('early'))} | {_pp(rel.get('late'))} |"
            )
    return lines


def _wrapped(report: dict[str, Any], phase: str, method: str) -> dict[str, Any]:
    for w in report.get("wrapped", []):
        if w["phase"] == phase and w["method"] == method:
            return w
    return {}


def assembly_tables(report: dict[str, Any]) -> list[str]:
    asm = report.get("assembly", {})
    if not asm.get("levels"):
        return []
    seed = asm.get("seed", {})
    lines = [
        "",
        f"| Assemble: {seed.get('memories')} memories, {asm['ingest']['turns']}-turn session "
        f"({asm['transcript_tokens']} tokens), budget {asm['budget']} | n | err | p50 ms | p95 ms | p99 ms "
        "| server p50 ms | OpenViking p50 / p95 ms | engine own p50 / p95 ms | OpenViking calls/RPC "
        "| assembled tok | transcript tok |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in asm["levels"]:
        s = level["ops"].get("Assemble", stats([]))
        w = _wrapped(report, f"assembly@{level['concurrency']}", "Assemble")
        lines.append(
            f"| {level['concurrency']} concurrent callers | {s['count']} | {s['errors']} "
            f"| {fmt(s['p50_ms'])} | {fmt(s['p95_ms'])} | {fmt(s['p99_ms'])} | {fmt(w.get('server_p50_ms'))} "
            f"| {fmt(w.get('openviking_p50_ms'))} / {fmt(w.get('openviking_p95_ms'))} "
            f"| {fmt(w.get('engine_own_p50_ms'))} / {fmt(w.get('engine_own_p95_ms'))} "
            f"| {fmt(w.get('openviking_calls_mean'))} | {fmt(level['assembled_tokens_mean'])} "
            f"| {fmt(level['transcript_tokens'])} |"
        )
    routes = report.get("openviking_routes", {})
    rows = []
    for level in asm["levels"]:
        r = routes.get(f"assembly@{level['concurrency']}", {})
        for route, v in r.get("routes", {}).items():
            rows.append(
                f"| {level['concurrency']} | `{route}` | {fmt(v['per_rpc'])} | {fmt(v['p50_ms'])} "
                f"| {fmt(v['p95_ms'])} | {fmt(v['p99_ms'])} |"
            )
    if rows:
        lines += [
            "",
            "| OpenViking calls inside Assemble: callers | route | calls/RPC | p50 ms | p95 ms | p99 ms |",
            "|---:|---|---:|---:|---:|---:|",
            *rows,
        ]
    return lines


def _commit_span(report: dict[str, Any], label: str | None) -> dict[str, Any]:
    if not label:
        return {}
    routes = report.get("openviking_routes", {}).get(label, {}).get("routes", {})
    for route, v in routes.items():
        if route.startswith("POST ") and route.endswith("/commit"):
            return v
    return {}


def compaction_table(report: dict[str, Any]) -> list[str]:
    comp = report.get("compaction", {})
    if not comp.get("sizes"):
        return []
    lines = [
        "",
        "| Compact: turns | tokens before → after | Compact RPC ms (sync) | OpenViking commit ms (in sync) "
        "| Compact RPC ms (background=true) | OpenViking commit ms (in background) "
        "| to COMPLETED ms (background) | checkpoint (sync / background) |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for size in comp["sizes"]:
        sync, bg = size["sync"], size["background"]
        cs, cb = _commit_span(report, sync.get("span_label")), _commit_span(report, bg.get("span_label"))
        lines.append(
            f"| {size['turns']} | {fmt(sync.get('tokens_before'))} → {fmt(sync.get('tokens_after'))} "
            f"| {fmt(sync.get('compact_ms'))} | {fmt(cs.get('p50_ms'))} | {fmt(bg.get('compact_ms'))} "
            f"| {fmt(cb.get('p50_ms'))} | {fmt(bg.get('to_completed_ms'))} "
            f"| {sync.get('status', sync.get('compact_error', '—'))} / "
            f"{bg.get('status', bg.get('compact_error', '—'))} |"
        )
    ex = comp.get("ops", {}).get("ExpandMemory")
    if ex:
        info = comp.get("expand", {})
        lines += [
            "",
            "| ExpandMemory | n | err | sessions | p50 ms | p95 ms | p99 ms | turns returned (mean) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            f"| limit 2/4/6, queries from the sessions' turns | {ex['count']} | {ex['errors']} "
            f"| {info.get('sessions')} | {fmt(ex['p50_ms'])} | {fmt(ex['p95_ms'])} | {fmt(ex['p99_ms'])} "
            f"| {fmt(info.get('turns_returned_mean'))} |",
        ]
    return lines


def write_chart(report: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "matplotlib not installed; no chart"
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    levels = report.get("concurrency", [])
    raw = {r["concurrency"]: r for r in report.get("openviking_raw", [])}
    ax = axes[0][0]
    width = 0.2
    for i, level in enumerate(levels):
        for j, (op, equiv) in enumerate(
            (("Assemble", "ov.assemble_equivalent"), ("AfterTurn", "ov.add_messages_batch"))
        ):
            s = level["ops"].get(op, {})
            ov = raw.get(level["concurrency"], {}).get("ops", {}).get(equiv, {})
            x = i + (j - 0.5) * 2 * width
            if s.get("p50_ms") is not None:
                ax.bar(
                    x - width / 2,
                    s["p95_ms"],
                    width,
                    color=("#9ecae1", "#fdae6b")[j],
                    label=f"{op} p95" if i == 0 else None,
                )
                ax.bar(
                    x - width / 2,
                    s["p50_ms"],
                    width,
                    color=("#3182bd", "#e6550d")[j],
                    label=f"{op} p50" if i == 0 else None,
                )
            if ov.get("p50_ms") is not None:
                ax.bar(
                    x + width / 2,
                    ov["p50_ms"],
                    width,
                    color="#999999",
                    label="OpenViking-only p50" if i == 0 and j == 0 else None,
                )
    ax.set_xticks(range(len(levels)), [f"{lv['concurrency']} sessions" for lv in levels])
    ax.set_ylabel("ms")
    ax.set_title("Latency by concurrency (engine vs OpenViking-only)")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    xs = [lv["concurrency"] for lv in levels]
    ax.plot(xs, [lv["turns_per_s"] for lv in levels], "o-", label="engine turns/s")
    ax.plot(xs, [raw.get(x, {}).get("turns_per_s") or 0 for x in xs], "s--", label="OpenViking-only turns/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent sessions")
    ax.set_title("Throughput")
    ax.legend(fontsize=7)
    ax = axes[1][0]
    points = report.get("growth", {}).get("points", [])
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], ".", markersize=3)
        ax.set_xlabel("turn")
        ax.set_ylabel("AfterTurn ms")
        ax2 = ax.twinx()
        ax2.plot([p[0] for p in points], [p[2] for p in points], "-", color="#999999")
        ax2.set_ylabel("transcript tokens")
    ax.set_title("Single-session growth: AfterTurn latency")
    ax = axes[1][1]
    recall = report.get("recall", {}).get("hit_rate", {})
    names = list(recall)
    for k, key in enumerate(("stored", "conversation_only")):
        vals = [recall[n][key]["rate"] or 0 for n in names]
        ax.bar([i + (k - 0.5) * 0.35 for i in range(len(names))], vals, 0.35, label=key)
    ax.set_xticks(range(len(names)), [n.replace("_", "\n") for n in names], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_title("Planted-fact hit rate")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return None


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
- **assembled tok/turn** counts (with `shared.tokens.TokenCounter`) what `Assemble` returned,
  against the whole transcript up to that turn.
- **Hit rate**: a planted fact's unique needle appears in the context. `engine_new_session` asks in a
  new session (`Assemble`), `engine_same_session` asks at the end of the original session with its whole
  transcript, `truncated_*` keep the newest messages that fit the budget (same session / all the
  user's sessions), `legacy_recall_fallback` is the `RecallFallback` prepend block.
- **Engine spans** (the wrapping measurement): the services export their spans over OTLP to a
  receiver in the bench; for each server span, *OpenViking* is the union of the OpenViking HTTP client
  spans in its trace (nested engine calls included), *engine own* is the rest (gRPC handling,
  validation, packing, token counting, CAS bookkeeping, polling waits). Tracing is on for the whole
  run (`--no-trace` turns it off), so every number above includes its small cost.
- **Growth**: one session AfterTurn by AfterTurn, the host re-sending the whole transcript each turn
  (tool results cut to {a["growth_tool_chars"]} characters to reach {a["growth_turns"]} turns within the
  cap); the OpenViking rows grow a twin session with `POST sessions/{{id}}/messages`, one message per
  call, the per-turn row being the sum of a turn's calls. Early/late columns show whether latency
  grows with the session.
- **Assemble at scale**: {a["memories"]} memories written with `content/write` (wait=false) and waited
  for until findable; a {a["assembly_turns"]}-turn session persisted with `Ingest`; each call sends
  the whole transcript plus a new question. *OpenViking* / *engine own* come from the services' spans
  (below); the route table is every OpenViking call made inside those Assembles.
- **Compact**: each size is ingested twice. The synchronous Compact's latency includes the engine
  waiting (bounded) for OpenViking's phase 2; *OpenViking commit* is the `POST sessions/{{id}}/commit`
  client span inside that RPC (phase 1 on OpenViking's side); the background=true twin returns after
  phase 1 and *to COMPLETED* is from its call until `GetCheckpoint` reports COMPLETED (polled every
  50 ms).
- Peak RSS is `VmHWM` from `/proc/<pid>/status` at the end of the run.

Raw numbers: `bench-results/report.json`; chart: `bench-results/report.png`.
"""


# --------------------------------------------------------------------------- main


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
    report["engine_startup_seconds"] = _r(time.monotonic() - engine_start)
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
            for level in args.concurrency:
                log(f"replaying {len(workload.sessions)}×{args.turns} at concurrency {level}")
                window_start = time.time_ns()
                result, _ = await phase_concurrency(stubs, workload, level, args, counter)
                spans.phases.append((f"concurrency {level}", window_start, time.time_ns()))
                report["concurrency"].append(result)
                log(
                    f"  {result['turns']} turns in {result['wall_s']} s; errors "
                    f"{ {k: v['errors'] for k, v in result['ops'].items()} }"
                )
                log(f"OpenViking-only equivalent at concurrency {level}")
                raw = await phase_openviking_raw(http, workload, level, args)
                report["openviking_raw"].append(raw)
                log(f"  {raw['turns']} turns in {raw['wall_s']} s")
            if args.memories > 0 and args.assembly_turns > 0:
                log(
                    f"assembly: {args.memories} memories, {args.assembly_turns}-turn session, "
                    f"concurrency {args.concurrency}"
                )
                report["assembly"] = await phase_assembly(stubs, http, args, counter, spans)
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
            sink.stop()
    return report


WRAPPED_METHODS = ("AfterTurn", "Assemble", "Compact", "ExpandMemory")


def route_summary(
    spans: list[SpanRecord], windows: list[tuple[str, str, int, int]]
) -> dict[str, dict[str, Any]]:
    """Per labelled window: the OpenViking calls inside its RPCs, by route (calls per RPC, p50/p99)."""
    out: dict[str, dict[str, Any]] = {}
    for label, method, start, end in windows:
        rpcs, routes = client_spans(spans, method, start, end)
        out[label] = {
            "rpcs": rpcs,
            "routes": {
                route: {
                    "per_rpc": _r(len(values) / rpcs, 2) if rpcs else None,
                    **{k: v for k, v in stats(values).items() if k != "errors"},
                }
                for route, values in sorted(routes.items(), key=lambda kv: -sum(kv[1]))
            },
        }
    return out


def wrapped_summary(spans: list[SpanRecord], windows: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """Per phase and RPC: server-side time split into OpenViking calls and the engine's own time."""
    splits = split_rpcs(spans, WRAPPED_METHODS)
    out: list[dict[str, Any]] = []
    for phase, start, end in windows:
        for method in WRAPPED_METHODS:
            chosen = [s for s in splits if s.method == method and start <= s.start_ns <= end]
            if not chosen:
                continue
            out.append(
                {
                    "phase": phase,
                    "method": method,
                    "count": len(chosen),
                    "server_p50_ms": _r(percentile([s.total_ms for s in chosen], 50)),
                    "server_p95_ms": _r(percentile([s.total_ms for s in chosen], 95)),
                    "openviking_p50_ms": _r(percentile([s.openviking_ms for s in chosen], 50)),
                    "openviking_p95_ms": _r(percentile([s.openviking_ms for s in chosen], 95)),
                    "engine_own_p50_ms": _r(percentile([s.total_ms - s.openviking_ms for s in chosen], 50)),
                    "engine_own_p95_ms": _r(percentile([s.total_ms - s.openviking_ms for s in chosen], 95)),
                    "openviking_calls_mean": _r(sum(s.openviking_calls for s in chosen) / len(chosen), 1),
                }
            )
    return out


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
