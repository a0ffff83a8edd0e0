# ruff: noqa: PLR0917
"""Replayed traffic: StoreMemory of planted facts, the workload at several concurrencies (Assemble
then AfterTurn per turn) and the same traffic shape straight against OpenViking."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from contextengine.v1 import (
    capture_pb2,
    common_pb2,
)

from shared.domain.messages import message_texts
from shared.domain.turn_index import (
    TURN_INDEX_ROOT,
    TURN_PROCESSING_MODE,
    IndexedMessage,
    turn_documents,
    write_operations,
)
from shared.tokens import TokenCounter
from tests.bench.common import (
    AGENT,
    Recorder,
    Stubs,
    after_turn_request,
    assemble_request,
    identity,
    ov_call,
    ov_message_body,
    percentile,
    rounded,
    run_pool,
    turn_messages,
    turn_plain_messages,
)
from tests.bench.workload import Session, Turn, Workload


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
            "assembled_tokens_mean": rounded(sum(self.assembled) / len(self.assembled), 1),
            "assembled_tokens_p95": rounded(percentile([float(a) for a in self.assembled], 95), 1),
            "transcript_tokens_mean": rounded(sum(self.transcript) / len(self.transcript), 1),
            "transcript_tokens_max": max(self.transcript),
            "assembled_over_transcript_mean": rounded(sum(ratios) / len(ratios), 3) if ratios else None,
            "turns_transcript_over_budget": len(over),
            "over_budget_assembled_tokens_mean": rounded(sum(a for a, _ in over) / len(over), 1)
            if over
            else None,
            "over_budget_transcript_tokens_mean": rounded(sum(t for _, t in over) / len(over), 1)
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
        assemble = assemble_request(ident, transcript, turn.user, budget)
        assembled = await rec.time("Assemble", stubs.assembly.Assemble(assemble, timeout=rpc_timeout))
        if assembled is not None and tokens is not None:
            own = sum(counter.count_message(message_texts(m)) for m in assembled.messages)
            own += counter.count(assembled.system_prompt_addition)
            tokens.assembled.append(own)
            tokens.transcript.append(transcript_tokens)
        transcript.extend(rest)
        transcript_tokens += sum(counter.count_message(message_texts(m)) for m in rest)
        after_turn = after_turn_request(ident, transcript, before, budget)
        await rec.time("AfterTurn", stubs.capture.AfterTurn(after_turn, timeout=rpc_timeout))
        done += 1
    return done


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
        "wall_s": rounded(wall),
        "turns_per_s": rounded(turns / wall if wall else 0.0),
        "rpcs_per_s": rounded(rpcs / wall if wall else 0.0),
        "capped": time.monotonic() > stop_at,
        "ops": rec.summary(),
        "tokens": tokens.summary(args.budget),
    }
    return result, tokens


async def phase_openviking_raw(
    http: httpx.AsyncClient,
    workload: Workload,
    level: int,
    args: argparse.Namespace,
    *,
    index_turns: bool = False,
) -> dict[str, Any]:
    """The OpenViking calls behind a turn, made directly: what OpenViking alone costs.

    With `index_turns`, each turn's exchange is also written as the engine's turn-index document
    (same text, same folder, `wait=false`): OpenViking alone doing what lets the engine recall
    conversation without an LLM, so the engine's overhead shows apart from that feature's cost.
    Those documents go to users of their own (`indexed_user`, created by `prepare_indexed_users`),
    so that they never show up in the engine's recall of the same users.
    """
    rec = Recorder()
    stop_at = time.monotonic() + args.level_seconds / 3
    prefix = "rawix" if index_turns else "raw"

    def memories_find(user: str, query: str, **extra: Any) -> Awaitable[Any]:
        body = {"query": query, "target_uri": "viking://~/memories", "limit": 12, "score_threshold": 0.0}
        return rec.time("ov.find", ov_call(http, "POST", "/api/v1/search/find", user, json=body | extra))

    async def worker(session: Session) -> int:
        session_id = f"{prefix}{level}-{session.session_id}"
        user = indexed_user(session.user_id) if index_turns else session.user_id
        done = 0
        sequence = 0
        for turn in session.turns:
            if time.monotonic() > stop_at:
                break
            texts = turn_plain_messages(turn)
            query = turn.user[:400]
            start = time.perf_counter()
            await asyncio.gather(
                memories_find(user, query),
                memories_find(user, query, tags=[f"agent={AGENT}"]),
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
            if index_turns:
                await rec.time("ov.turn_index_write", _index_turn(http, user, session_id, turn, sequence))
            sequence += len(texts)
            done += 1
        return done

    turns, wall = await run_pool(workload.sessions, level, worker)
    return {
        "concurrency": level,
        "turns": turns,
        "wall_s": rounded(wall),
        "turns_per_s": rounded(turns / wall if wall else 0.0),
        "ops": rec.summary(),
    }


def indexed_user(user_id: str) -> str:
    """The user whose memories hold the indexed OpenViking-only phase's documents."""
    return f"{user_id}-ov-index"


async def prepare_indexed_users(http: httpx.AsyncClient, workload: Workload) -> None:
    """Create the indexed phase's users and their index folder before it is timed (OpenViking
    sets up a new user's preset folders on its first write, which takes seconds)."""
    for user_id in sorted({s.user_id for s in workload.sessions}):
        user = indexed_user(user_id)
        with contextlib.suppress(RuntimeError):  # already there
            await ov_call(http, "POST", "/api/v1/fs/mkdir", user, json={"uri": TURN_INDEX_ROOT})


async def _index_turn(http: httpx.AsyncClient, user: str, session_id: str, turn: Turn, first: int) -> Any:
    """The engine's turn-index document of `turn` (`shared.domain.turn_index`), written as capture
    writes it."""
    user_message, rest = turn_messages(turn, session_id)
    messages = [IndexedMessage(first + i, m) for i, m in enumerate([user_message, *rest])]
    body = {
        "root_uri": TURN_INDEX_ROOT,
        "operations": write_operations(turn_documents(session_id, messages, datetime.now(UTC))),
        "wait": False,
        "processing_mode": TURN_PROCESSING_MODE,
    }
    answer = await ov_call(http, "POST", "/api/v1/content/batch-write", user, json=body)
    if (answer.get("error") or {}).get("code") != "NOT_FOUND":
        return answer
    # The user's first exchange: the index folder does not exist yet (as in TurnIndexWriter).
    await ov_call(http, "POST", "/api/v1/fs/mkdir", user, json={"uri": TURN_INDEX_ROOT})
    return await ov_call(http, "POST", "/api/v1/content/batch-write", user, json=body)


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
