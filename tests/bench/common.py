# ruff: noqa: PLR0917, ASYNC109
"""What every bench phase shares: measurements, the workload as messages, raw OpenViking calls,
the gRPC stubs and the span windows."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
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
    compaction_pb2_grpc,
)

from shared.tokens import TokenCounter
from tests.bench.workload import Session, Turn

Role = common_pb2.MessageRole


ACCOUNT = "bench"


AGENT = "main"


MODEL = "gpt-4o"


PENDING = checkpoint_pb2.CHECKPOINT_STATUS_PENDING


COMPLETED = checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED


FAILED = checkpoint_pb2.CHECKPOINT_STATUS_FAILED


STATUS_NAMES = {v: k.removeprefix("CHECKPOINT_STATUS_") for k, v in checkpoint_pb2.CheckpointStatus.items()}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


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
            self.errors[op].append(describe_error(exc))
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
        "p50_ms": rounded(percentile(values, 50)),
        "p95_ms": rounded(percentile(values, 95)),
        "p99_ms": rounded(percentile(values, 99)),
        "mean_ms": rounded(sum(values) / len(values)) if values else None,
    }
    if errors:
        out["error_samples"] = sorted(set(errors))[:3]
    return out


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {(exc.details() or '')[:200]}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def identity(user_id: str, session_id: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user_id, agent_id=AGENT, session_id=session_id)


def assemble_request(
    ident: common_pb2.Identity, messages: list[common_pb2.ConversationMessage], prompt: str, budget: int
) -> assembly_pb2.AssembleRequest:
    """The host's Assemble before a turn: its transcript, the new user message last."""
    return assembly_pb2.AssembleRequest(
        identity=ident, messages=messages, token_budget=budget, model=MODEL, prompt=prompt
    )


def after_turn_request(
    ident: common_pb2.Identity, transcript: list[common_pb2.ConversationMessage], before: int, budget: int
) -> capture_pb2.AfterTurnRequest:
    """The host's AfterTurn: the whole transcript, `before` of its messages from earlier turns."""
    return capture_pb2.AfterTurnRequest(
        identity=ident, messages=transcript, pre_prompt_message_count=before, token_budget=budget, model=MODEL
    )


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


@dataclass
class Stubs:
    capture: capture_pb2_grpc.CaptureServiceStub
    assembly: assembly_pb2_grpc.AssemblyServiceStub
    compaction: compaction_pb2_grpc.CompactionServiceStub


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


INGEST_REFUSED = "Ingest refused (sent again after its retry hint)"
"""The op under which the bench counts Ingest calls capture refused for backpressure."""
INGEST_RETRY_SECONDS = 2.0
"""What capture's RESOURCE_EXHAUSTED answer says to wait (`services.capture.backlog`)."""


async def _ingest(
    stubs: Stubs,
    ident: common_pb2.Identity,
    batch: list[common_pb2.ConversationMessage],
    rec: Recorder,
    timeout: float,
) -> None:
    """One Ingest as a host sends it: a refusal for backpressure (nothing stored) is sent again
    after its hint and counted apart; any other failure is the call's error."""
    request = capture_pb2.IngestRequest(identity=ident, messages=batch)
    while True:
        start = time.perf_counter()
        try:
            await stubs.capture.Ingest(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            refused = exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            rec.errors[INGEST_REFUSED if refused else "Ingest"].append(describe_error(exc))
            if not refused:
                return
            await asyncio.sleep(INGEST_RETRY_SECONDS)
            continue
        rec.latencies["Ingest"].append((time.perf_counter() - start) * 1000.0)
        return


async def ingest_session(
    stubs: Stubs, session: Session, session_id: str, rec: Recorder, timeout: float, batch_size: int = 80
) -> None:
    ident = identity(session.user_id, session_id)
    batch: list[common_pb2.ConversationMessage] = []
    for turn in session.turns:
        user, rest = turn_messages(turn, session_id)
        batch.extend([user, *rest])
        if len(batch) >= batch_size:
            await _ingest(stubs, ident, batch, rec, timeout)
            batch = []
    if batch:
        await _ingest(stubs, ident, batch, rec, timeout)


@dataclass
class SpanWindows:
    """Named time windows whose RPC spans are looked at after the run (spans arrive late)."""

    phases: list[tuple[str, int, int]] = field(default_factory=list)
    """(phase, start ns, end ns) for the engine-own vs OpenViking split."""
    routes: list[tuple[str, str, int, int]] = field(default_factory=list)
    """(label, RPC method, start ns, end ns) for the OpenViking calls inside those RPCs."""
    traffic: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(label, start ns, end ns, turns) of a traffic phase and its background work: every
    OpenViking call the services made in it, per turn."""


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


def fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)
