# ruff: noqa: RUF001, PLR0915
"""Assembly at scale: seeded memories and a persisted long session, Assemble with the whole
transcript at several concurrencies."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from contextengine.v1 import (
    assembly_pb2,
    common_pb2,
)

from services.assembly.recall import TURN_CANDIDATES, USER_MEMORIES_URI
from shared.domain.messages import message_texts
from shared.tokens import TokenCounter
from tests.bench.common import (
    AGENT,
    MODEL,
    Recorder,
    Role,
    SpanWindows,
    Stubs,
    expand_queries,
    identity,
    ingest_session,
    log,
    ov_call,
    rounded,
    run_pool,
    text_message,
    turn_messages,
)
from tests.bench.phases.assemble_profile import profile_assemble
from tests.bench.workload import TOPICS, generate

MEMORY_USER = "bench-asm-user"
FIND_OP = "ov.find(same query)"


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
        "write_s": rounded(written_s),
        "findable_after_s": rounded(time.perf_counter() - start),
        "embeddings_per_s": rounded(len(texts) / (time.perf_counter() - start)),
        "not_findable_samples": sorted(pending),
        "ops": rec.summary(),
    }


async def phase_assembly(
    stubs: Stubs,
    http: httpx.AsyncClient,
    args: argparse.Namespace,
    counter: TokenCounter,
    spans: SpanWindows,
    *,
    settle: Callable[[], Awaitable[float]],
) -> dict[str, Any]:
    """Assemble against 1k memories and a persisted 500-turn session, at several concurrencies;
    `settle` waits (and says how long) until OpenViking and the embedder are quiet."""
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
    out["ingest"] = {
        "turns": len(session.turns),
        "seconds": rounded(time.perf_counter() - start),
        **rec.summary(),
    }
    # Ingest indexes the 500 exchanges after its answers and the seeded memories may still be
    # embedding: time the Assembles and their finds on a machine that has digested both.
    out["settled_after_s"] = rounded(await settle())
    transcript: list[common_pb2.ConversationMessage] = []
    for turn in session.turns:
        user, rest = turn_messages(turn, session_id)
        transcript.extend([user, *rest])
    transcript_tokens = sum(counter.count_message(message_texts(m)) for m in transcript)
    prompts = expand_queries(session, args.seed, 16)

    def prompt_for(i: int) -> str:
        return f"About {prompts[i % len(prompts)]} - what did we settle on?"

    def assemble_request(i: int, tag: str) -> assembly_pb2.AssembleRequest:
        prompt = prompt_for(i)
        question = text_message(Role.MESSAGE_ROLE_USER, prompt, f"{session_id}-{tag}-{i}")
        return assembly_pb2.AssembleRequest(
            identity=identity(MEMORY_USER, session_id),
            messages=[*transcript, question],
            token_budget=args.assembly_budget,
            model=MODEL,
            prompt=prompt,
        )

    def find_body(i: int) -> dict[str, Any]:
        """The find Assemble makes for this prompt (memories and exchanges, one embedding)."""
        return {
            "query": prompt_for(i),
            "target_uri": USER_MEMORIES_URI,
            "limit": TURN_CANDIDATES,
            "score_threshold": 0.0,
        }

    levels: list[dict[str, Any]] = []
    assembled_by_level: dict[int, list[int]] = defaultdict(list)
    prompt_by_level: dict[int, list[int]] = defaultdict(list)
    requests: dict[int, assembly_pb2.AssembleRequest] = {}
    """The round's requests, built before it (the client's work stays out of the timed calls)."""
    replies: dict[int, assembly_pb2.AssembleResponse] = {}
    for level, calls in zip(args.concurrency, args.assembly_calls, strict=False):
        rec = Recorder()
        assembled_tokens = assembled_by_level[level]
        prompt_tokens = prompt_by_level[level]
        stop_at = time.monotonic() + args.assembly_level_seconds

        async def call(i: int, rec: Recorder = rec, stop_at: float = stop_at) -> int:
            if time.monotonic() > stop_at:
                return 0
            got = await rec.time("Assemble", stubs.assembly.Assemble(requests[i], timeout=args.rpc_timeout))
            if got is not None:
                replies[i] = got
            return 1

        def count_round(level: int = level) -> None:
            """Tokens of the round's replies, counted after the round: the bench client's own
            work never runs inside another caller's timed call."""
            for i, got in sorted(replies.items()):
                own = sum(counter.count_message(message_texts(m)) for m in got.messages)
                assembled_by_level[level].append(own + counter.count(got.system_prompt_addition))
                prompt_by_level[level].append(counter.count_message([requests[i].prompt]))
            replies.clear()

        async def find(i: int, rec: Recorder = rec) -> int:
            call = ov_call(http, "POST", "/api/v1/search/find", MEMORY_USER, json=find_body(i))
            await rec.time(FIND_OP, call)
            return 1

        log(f"  Assemble ×{calls} at concurrency {level}, each round followed by finds of its queries")
        window_start = time.time_ns()
        done, wall = 0, 0.0
        for first in range(0, calls, level):
            # Rounds of `level` Assembles, then `level` finds of the same queries: both see the
            # same moment (OpenViking's indexing backlog, the machine's other load).
            batch = list(range(first, min(first + level, calls)))
            requests.clear()
            requests.update({i: assemble_request(i, f"q{level}") for i in batch})
            finished, seconds = await run_pool(batch, level, call)
            count_round()
            done, wall = done + finished, wall + seconds
            if not finished:
                break
            await run_pool(batch[:finished], level, find)
        window_end = time.time_ns()
        spans.phases.append((f"assembly@{level}", window_start, window_end))
        spans.routes.append((f"assembly@{level}", "Assemble", window_start, window_end))
        levels.append(
            {
                "concurrency": level,
                "calls": done,
                "capped": done < calls,
                "wall_s": rounded(wall),
                "calls_per_s": rounded(done / wall if wall else 0.0),
                "ops": rec.summary(),
                "assembled_tokens_mean": rounded(sum(assembled_tokens) / len(assembled_tokens), 1)
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
    if args.profile_calls > 0:
        log(f"  cProfile of Assemble in process ×{args.profile_calls}")
        requests = [assemble_request(i, "profile") for i in range(args.profile_calls)]
        out["profile"] = await profile_assemble(str(http.base_url), requests, Path(args.out))
    return out
