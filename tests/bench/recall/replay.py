"""Replays the generated histories through the public gRPC API as a host would, then asks.

Per session: one AfterTurn per exchange (the host resends the whole transcript), a Compact at
the end. The last session is left open for the *continuing* questions (asked at its end, with
its transcript), then compacted; the *new-session* questions come in a fresh session whose
transcript is the question alone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
import httpx
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)

from shared.domain.conversation import text_message
from tests.bench.engine import EngineProcess
from tests.bench.recall.dataset import Question, SessionScript, UserHistory

ACCOUNT = "bench-recall"
ENGINE_ENV = {"CONTEXT_ENGINE_COMPACT_TURN_THRESHOLD": "1000"}
"""The replay compacts at session end (as the issue's benchmark does), not by turn count."""
AGENT = "main"
Role = common_pb2.MessageRole
INDEX_WINDOW_S = 2.5
"""How long capture may hold a turn's exchanges for the turn index (`turnIndexCoalesceMs`, 2 s),
with a margin."""
EXCHANGE_INDEX_SYNC_S = 10.0
"""How long the questions wait after the warm-up call for each assembly replica's exchange
index to take the user up (its first sync; a few seconds for ~300 exchanges while the other
users replay). Asked before, a question's lexical leg ranks the semantic pool only, and how
many did so depended on timing: the hard tier's 1k cells moved by 1-2 points run to run."""
QUIET_TIMEOUT_S = 120.0


@dataclass
class Stubs:
    capture: object
    assembly: object
    compaction: object


@dataclass
class Answer:
    """What one Assemble returned for one question at one budget."""

    question: Question
    variant: str
    """Which assembly configuration answered (e.g. the lexical source)."""
    mode: str
    budget: int
    text: str
    tokens: int
    seconds: float


def connect(procs: dict[str, EngineProcess]) -> tuple[Stubs, list[grpc.aio.Channel]]:
    """Stubs on the three services of `procs` (and the channels to close)."""
    channels = {name: grpc.aio.insecure_channel(proc.address) for name, proc in procs.items()}
    stubs = Stubs(
        capture_pb2_grpc.CaptureServiceStub(channels["capture"]),
        assembly_pb2_grpc.AssemblyServiceStub(channels["assembly"]),
        compaction_pb2_grpc.CompactionServiceStub(channels["compaction"]),
    )
    return stubs, list(channels.values())


@dataclass(frozen=True)
class Asked:
    """Where a question is asked: the session and the transcript before it."""

    user_id: str
    session_id: str
    history: Sequence[common_pb2.ConversationMessage]
    mode: str


@dataclass
class ReplayStats:
    after_turn_seconds: list[float] = field(default_factory=list)
    compact_seconds: list[float] = field(default_factory=list)


def identity(user_id: str, session_id: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user_id, agent_id=AGENT, session_id=session_id)


def transcript(script: SessionScript, upto: int) -> list[common_pb2.ConversationMessage]:
    """The session's messages for exchanges [0, upto), dated."""
    out = []
    for i, exchange in enumerate(script.exchanges[:upto]):
        when = script.timestamp(i)
        out.append(text_message(Role.MESSAGE_ROLE_USER, exchange.user, f"{script.session_id}-{i}-u", when))
        out.append(
            text_message(Role.MESSAGE_ROLE_ASSISTANT, exchange.assistant, f"{script.session_id}-{i}-a", when)
        )
    return out


def json_strings(text: str) -> list[str]:
    """The string values of `text` if it is JSON (so escaping hides no match), else `[text]`."""
    try:
        value = json.loads(text)
    except ValueError:
        return [text]
    strings: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return strings


def assembled_text(response: assembly_pb2.AssembleResponse) -> str:
    """What the model sees: the system prompt addition, message texts, tool results' strings."""
    parts = [response.system_prompt_addition]
    for m in response.messages:
        for block in m.content:
            kind = block.WhichOneof("block")
            if kind == "text":
                parts.append(block.text.text)
            elif kind == "tool_result":
                for content in block.tool_result.content:
                    if content.HasField("text"):
                        parts.extend(json_strings(content.text.text))
    return "\n".join(parts)


async def replay_session(stubs: Stubs, user_id: str, script: SessionScript, stats: ReplayStats) -> None:
    for upto in range(1, len(script.exchanges) + 1):
        started = time.perf_counter()
        await stubs.capture.AfterTurn(  # type: ignore[attr-defined]
            capture_pb2.AfterTurnRequest(
                identity=identity(user_id, script.session_id),
                messages=transcript(script, upto),
                pre_prompt_message_count=2 * (upto - 1),
            ),
            timeout=60,
        )
        stats.after_turn_seconds.append(time.perf_counter() - started)


async def compact(stubs: Stubs, user_id: str, session_id: str, stats: ReplayStats) -> None:
    started = time.perf_counter()
    await stubs.compaction.Compact(  # type: ignore[attr-defined]
        compaction_pb2.CompactRequest(identity=identity(user_id, session_id), force=True), timeout=120
    )
    stats.compact_seconds.append(time.perf_counter() - started)


async def ask(stubs: Stubs, where: Asked, question: Question, budget: int, variant: str = "") -> Answer:
    prompt = text_message(Role.MESSAGE_ROLE_USER, question.text, f"q-{where.mode}-{budget}")
    started = time.perf_counter()
    response = await stubs.assembly.Assemble(  # type: ignore[attr-defined]
        assembly_pb2.AssembleRequest(
            identity=identity(where.user_id, where.session_id),
            messages=[*where.history, prompt],
            token_budget=budget,
            prompt=question.text,
        ),
        timeout=60,
    )
    seconds = time.perf_counter() - started
    text = assembled_text(response)
    return Answer(question, variant, where.mode, budget, text, response.estimated_tokens, seconds)


def openviking_headers(user_id: str) -> dict[str, str]:
    """The bench account's headers for `user_id`, for calls straight to OpenViking."""
    return {"X-OpenViking-Account": ACCOUNT, "X-OpenViking-User": user_id}


async def openviking_quiet(http: httpx.AsyncClient, user_id: str, *, give_up_s: float) -> None:
    """Until OpenViking's queues are drained (`system/wait`): what was stored is findable."""
    started = time.perf_counter()
    headers = openviking_headers(user_id)
    while True:  # system/wait blocks until the queues drain; one call may time out first
        try:
            waited = await http.post("/api/v1/system/wait", headers=headers, json={}, timeout=QUIET_TIMEOUT_S)
            waited.raise_for_status()
            return
        except httpx.ReadTimeout:
            if time.perf_counter() - started > give_up_s:
                raise


async def settled(openviking_url: str, user_id: str, askers: dict[str, object], question: Question) -> None:
    """What the replay stored is findable and in every asker's exchange index: capture's index
    window passes, OpenViking's queues drain, and one warm-up question per asker starts its
    replica's first sync of the user, given `EXCHANGE_INDEX_SYNC_S` to finish."""
    await asyncio.sleep(INDEX_WINDOW_S)
    async with httpx.AsyncClient(base_url=openviking_url) as http:
        await openviking_quiet(http, user_id, give_up_s=QUIET_TIMEOUT_S * 5)
    for assembly in askers.values():
        await ask(Stubs(None, assembly, None), Asked(user_id, "warm-up", [], "new"), question, 1000)
    await asyncio.sleep(EXCHANGE_INDEX_SYNC_S)


async def gather_bounded(calls: Sequence[object], concurrency: int) -> list[Answer]:
    gate = asyncio.Semaphore(concurrency)

    async def one(call: object) -> Answer:
        async with gate:
            return await call  # type: ignore[misc,no-any-return]

    return await asyncio.gather(*(one(c) for c in calls))


async def run_user(
    stubs: Stubs,
    history: UserHistory,
    *,
    askers: dict[str, object],
    budgets: Sequence[int],
    stats: ReplayStats,
    concurrency: int,
    openviking_url: str,
) -> list[Answer]:
    """Replay one user's sessions through `stubs`, then, once it is `settled`, ask every question
    in both modes at every budget through each of `askers` (assembly stubs by variant name)."""
    *earlier, last = history.sessions
    for script in earlier:
        await replay_session(stubs, history.user_id, script, stats)
        await compact(stubs, history.user_id, script.session_id, stats)
    await replay_session(stubs, history.user_id, last, stats)
    await settled(openviking_url, history.user_id, askers, history.questions[0])
    where = Asked(history.user_id, last.session_id, transcript(last, len(last.exchanges)), "continuing")
    continuing = [
        ask(Stubs(stubs.capture, assembly, stubs.compaction), where, q, b, variant)
        for variant, assembly in askers.items()
        for q in history.questions
        for b in budgets
    ]
    answers = await gather_bounded(continuing, concurrency)
    await compact(stubs, history.user_id, last.session_id, stats)
    fresh = [
        ask(
            Stubs(stubs.capture, assembly, stubs.compaction),
            Asked(history.user_id, f"new-{i}", [], "new"),
            q,
            b,
            variant,
        )
        for variant, assembly in askers.items()
        for i, q in enumerate(history.questions)
        for b in budgets
    ]
    return answers + await gather_bounded(fresh, concurrency)
