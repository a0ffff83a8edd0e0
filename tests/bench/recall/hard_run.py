"""The hard recall tier: long two-person conversations replayed through the engine, scored next
to BM25, MiniLM and their fusion over the same raw dated turns, in one run.

Replay (tests.bench.recall.replay): one AfterTurn per exchange with the whole transcript, a
Compact at each session end; each question is asked at every budget in a fresh session (`new`)
and at the end of the last session with its transcript (`continuing`). The baselines get the
same budget minus the question, counted with the engine's counter. Then the latency phase
(tests.bench.recall.scale) times Assemble next to one `find` for a user with N stored exchanges.
`tests.bench.recall.hard_report` renders the result.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import grpc
import httpx
import numpy as np

from shared.tokens import TokenCounter
from tests.bench.engine import start_engine, stop_engine
from tests.bench.recall.dated_baselines import BASELINES, TurnRankers, dated_turns, embed, pack
from tests.bench.recall.hard_dataset import KINDS, Conversation, asked_by_nickname, generate_hard
from tests.bench.recall.replay import ENGINE_ENV, Answer, ReplayStats, Stubs, connect, run_user
from tests.bench.recall.scale import latency_at_scale
from tests.bench.recall.scoring import BUDGETS, engine_rows, evidence_recall, p50_ms

ENGINE = "engine"
Row = dict[str, float]


def _row(recalls: Sequence[tuple[str, float]], tokens: Sequence[int], budget: int) -> Row:
    """Mean recall (all and per kind, %), median tokens and the largest overshoot of `budget`."""
    row = {"recall": 100 * statistics.fmean(r for _, r in recalls)}
    for kind in KINDS:
        of_kind = [r for k, r in recalls if k == kind]
        row[f"recall_{kind}"] = 100 * statistics.fmean(of_kind) if of_kind else float("nan")
    row["tokens"] = statistics.median(tokens)
    row["max_over"] = max(t - budget for t in tokens)
    return row


async def baseline_rows(
    conversations: Sequence[Conversation], counter: TokenCounter, embeddings_url: str
) -> dict[str, dict[int, Row]]:
    """baseline -> budget -> row, over every question of every conversation."""
    recalls: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    spent: dict[tuple[str, int], list[int]] = defaultdict(list)
    async with httpx.AsyncClient(base_url=embeddings_url, timeout=120) as http:
        for conversation in conversations:
            turns = dated_turns(conversation, counter)
            rankers = TurnRankers(turns, await embed(http, [t.line for t in turns]))
            questions = conversation.questions
            vectors = await embed(http, [q.text for q in questions])
            for question, vector in zip(questions, vectors, strict=True):
                asked = counter.count_message([question.text])
                for name, order in rankers.rankings(question.text, np.asarray(vector)).items():
                    for budget in BUDGETS:
                        context = pack(turns, order, budget - asked)
                        recalls[(name, budget)].append((question.kind, evidence_recall(question, context)))
                        shown = sum(counter.count_message([line]) for line in context.splitlines())
                        spent[(name, budget)].append(asked + shown)
    return {name: {b: _row(recalls[(name, b)], spent[(name, b)], b) for b in BUDGETS} for name in BASELINES}


def engine_by_mode(answers: Sequence[Answer]) -> dict[str, dict[int, Row]]:
    return {mode: dict(rows) for mode, rows in engine_rows(answers, KINDS)[ENGINE].items()}


def over_budget(engine: dict[str, dict[int, Row]], baselines: dict[str, dict[int, Row]]) -> list[str]:
    """Every builder and budget whose context exceeded the budget, as a sentence each."""
    builders = {f"{ENGINE}, {mode}": rows for mode, rows in engine.items()} | baselines
    return [
        f"{name} at {budget}: {row['max_over']:.0f} tokens over"
        for name, rows in builders.items()
        for budget, row in rows.items()
        if row["max_over"] > 0
    ]


async def _latency_at_scale_or_failure(
    stubs: Stubs, openviking_url: str, user_id: str, *, exchanges: int, questions: Sequence[str], seed: int
) -> dict[str, object]:
    """The latency phase's report, or what stopped it: recall measured before must not be lost."""
    try:
        result = await latency_at_scale(
            stubs, openviking_url, user_id, exchanges=exchanges, questions=questions, seed=seed
        )
    except (httpx.HTTPError, grpc.aio.AioRpcError) as exc:
        return {"stored_exchanges": exchanges, "error": f"{type(exc).__name__}: {exc}"}
    report: dict[str, object] = {**result.as_report()}
    return report


async def run_hard(
    args: argparse.Namespace, openviking_url: str, embeddings_url: str, log_dir: Path
) -> dict[str, object]:
    conversations = generate_hard(seed=args.seed, users=args.hard_users, sessions=args.hard_sessions)
    if args.ask_by_nickname:
        conversations = asked_by_nickname(conversations)
    run_tag = uuid.uuid4().hex[:6]
    for conversation in conversations:  # a rerun over kept data must not see the earlier run's streams
        conversation.user_id = f"{conversation.user_id}-{run_tag}"
    counter = TokenCounter("o200k_base")
    baselines = await baseline_rows(conversations, counter, embeddings_url)
    procs = start_engine(openviking_url, log_dir, ENGINE_ENV)
    try:
        stubs, channels = connect(procs)
        stats = ReplayStats()
        started = time.perf_counter()
        per_user = await asyncio.gather(
            *(
                run_user(
                    stubs,
                    c,
                    askers={ENGINE: stubs.assembly},
                    budgets=BUDGETS,
                    stats=stats,
                    concurrency=args.concurrency,
                    openviking_url=openviking_url,
                )
                for c in conversations
            )
        )
        replay_seconds = time.perf_counter() - started
        questions = [q.text for c in conversations for q in c.questions][: args.latency_n]
        scale = await _latency_at_scale_or_failure(
            stubs,
            openviking_url,
            f"bench-hard-scale-{run_tag}",
            exchanges=args.scale_exchanges,
            questions=questions,
            seed=args.seed,
        )
        for channel in channels:
            await channel.close()
    finally:
        stop_engine(procs)
    engine = engine_by_mode([a for answers in per_user for a in answers])
    return {
        "tier": "hard",
        "workload": {
            "users": len(conversations),
            "sessions_per_user": args.hard_sessions,
            "messages_per_user": [2 * sum(len(s.exchanges) for s in c.sessions) for c in conversations],
            "questions": {k: sum(q.kind == k for c in conversations for q in c.questions) for k in KINDS},
            "seed": args.seed,
            "asked_by": "nickname" if args.ask_by_nickname else "full name",
            "replay_seconds": round(replay_seconds, 1),
            "after_turn_p50_ms": p50_ms(stats.after_turn_seconds),
        },
        "engine": engine,
        "baselines": baselines,
        "over_budget": over_budget(engine, baselines),
        "scale": scale,
    }
