"""The recall-quality benchmark: evidence recall and assembled tokens per budget, engine vs baselines.

`python -m tests.bench.recall.run [--tier easy|hard|both] [--openviking-url URL --embeddings-url
URL]` starts the local stack (or uses the given one) and the three services as separate
processes, and runs one or both tiers:

- *easy* (`--users 3 --sessions 20`): the generated histories of tests.bench.recall.dataset,
  written to `bench-results/recall.{json,md}`, with the lexical-source ablation and the stand-in
  LLM variant;
- *hard* (`--hard-users 3 --hard-sessions 26 --scale-exchanges 10000`): the long two-person
  conversations of tests.bench.recall.hard_dataset next to BM25, MiniLM and RRF over the raw
  dated turns, and latency at scale (tests.bench.recall.hard_run), written to
  `bench-results/recall-hard.{json,md}`.

Evidence recall: the share of a question's gold turns whose text is in what the model would see
(assembled messages, recalled items, system prompt), averaged over questions. Latency: Assemble
p50 next to one OpenViking `search/find` of the same question, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import grpc
import httpx
from contextengine.v1 import assembly_pb2_grpc

from shared.localstack.stack import LocalStack, StackSettings
from shared.tokens import TokenCounter
from tests.bench.engine import start_engine, stop_engine
from tests.bench.recall.baselines import Bm25Baseline, RawMessage, newest_first, raw_messages
from tests.bench.recall.dataset import KINDS, Question, UserHistory, generate
from tests.bench.recall.hard_dataset import SESSIONS
from tests.bench.recall.hard_report import markdown as hard_markdown
from tests.bench.recall.hard_run import run_hard
from tests.bench.recall.llm_variant import llm_answers, llm_openviking
from tests.bench.recall.replay import (
    ENGINE_ENV,
    Asked,
    ReplayStats,
    Stubs,
    ask,
    connect,
    gather_bounded,
    openviking_headers,
    run_user,
)
from tests.bench.recall.scoring import BUDGETS, MODES, engine_rows, evidence_recall, p50_ms

DEFAULT_VARIANT = "engine"
LEXICAL_ENV = "CONTEXT_ENGINE_RECALL_LEXICAL_SOURCE"
FIND_TARGET = "viking://~/memories"


def history_messages(history: UserHistory, counter: TokenCounter) -> list[RawMessage]:
    texts = [t for s in history.sessions for e in s.exchanges for t in (e.user, e.assistant)]
    return raw_messages(texts, counter)


def baseline_rows(histories: Sequence[UserHistory], counter: TokenCounter) -> dict[str, dict[int, float]]:
    scores: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for history in histories:
        messages = history_messages(history, counter)
        bm25 = Bm25Baseline(messages)
        for question in history.questions:
            room = lambda budget, q=question: budget - counter.count_message([q.text])  # noqa: E731
            for budget in BUDGETS:
                scores["bm25"][budget].append(
                    evidence_recall(question, "\n".join(bm25.context(question.text, room(budget))))
                )
                scores["truncation"][budget].append(
                    evidence_recall(question, "\n".join(newest_first(messages, room(budget))))
                )
    return {name: {b: 100 * statistics.fmean(v) for b, v in per.items()} for name, per in scores.items()}


async def find_latency(
    openviking_url: str, histories: Sequence[UserHistory], n: int, callers: int
) -> list[float]:
    """One plain OpenViking find per question (the same query over the same targets as recall)."""
    gate = asyncio.Semaphore(callers)
    async with httpx.AsyncClient(base_url=openviking_url, timeout=60) as http:

        async def one(user_id: str, question: Question) -> float:
            headers = openviking_headers(user_id)
            body = {"query": question.text, "target_uri": FIND_TARGET, "limit": 80}
            async with gate:
                started = time.perf_counter()
                response = await http.post("/api/v1/search/find", headers=headers, json=body)
                response.raise_for_status()
                return time.perf_counter() - started

        return list(await asyncio.gather(*(one(h.user_id, q) for h in histories for q in h.questions[:n])))


async def assemble_latency(
    stubs: Stubs, histories: Sequence[UserHistory], n: int, callers: int
) -> list[float]:
    calls = [
        ask(stubs, Asked(h.user_id, f"lat-{callers}-{i}", [], "new"), q, 4000)
        for h in histories
        for i, q in enumerate(h.questions[:n])
    ]
    return [a.seconds for a in await gather_bounded(calls, callers)]


def markdown(report: dict[str, object]) -> str:
    engine = report["engine"]
    baselines = report["baselines"]
    assert isinstance(engine, dict) and isinstance(baselines, dict)
    head = "| context builder | " + " | ".join(f"{b // 1000}k" for b in BUDGETS) + " |"
    lines = [
        "### Evidence recall (%) by budget",
        "",
        head,
        "|---|" + "---:|" * len(BUDGETS),
    ]
    for variant, modes in engine.items():
        for mode in MODES:
            row = modes.get(mode, {})
            cells = [f"{row[b]['recall']:.1f}" if b in row else "-" for b in BUDGETS]
            lines.append(f"| {variant}, {mode} session | " + " | ".join(cells) + " |")
    for name, row in baselines.items():
        lines.append(f"| {name} over raw turns | " + " | ".join(f"{row[b]:.1f}" for b in BUDGETS) + " |")
    lines += ["", "### Engine by question kind (%), and assembled tokens (median; max over budget)", ""]
    lines.append("| mode | budget | " + " | ".join(KINDS) + " | tokens | max over |")
    lines.append("|---|---:|" + "---:|" * (len(KINDS) + 2))
    for mode in MODES:
        for budget in BUDGETS:
            row = engine.get(DEFAULT_VARIANT, {}).get(mode, {}).get(budget)
            if row:
                kinds = " | ".join(f"{row.get('recall_' + k, float('nan')):.1f}" for k in KINDS)
                lines.append(f"| {mode} | {budget} | {kinds} | {row['tokens']:.0f} | {row['max_over']:.0f} |")
    latency = report["latency"]
    assert isinstance(latency, dict)
    lines += [
        "",
        "### Latency (same run)",
        "",
        "| what | p50 ms |",
        "|---|---:|",
        *(f"| {k} | {v} |" for k, v in latency.items()),
    ]
    return "\n".join(lines) + "\n"


async def run(
    args: argparse.Namespace, openviking_url: str, log_dir: Path, llm_openviking_url: str = ""
) -> dict[str, object]:
    histories = generate(seed=args.seed, users=args.users, sessions=args.sessions)
    run_tag = uuid.uuid4().hex[:6]
    for history in histories:  # a rerun over kept data must not see the earlier run's streams
        history.user_id = f"{history.user_id}-{run_tag}"
    counter = TokenCounter("o200k_base")
    procs = start_engine(openviking_url, log_dir, ENGINE_ENV)
    variants = {
        source: start_engine(openviking_url, log_dir, {LEXICAL_ENV: source}, services=("assembly",))
        for source in args.lexical_variants
    }
    try:
        stubs, channels = connect(procs)
        askers: dict[str, object] = {DEFAULT_VARIANT: stubs.assembly}
        for source, variant in variants.items():
            channels.append(grpc.aio.insecure_channel(variant["assembly"].address))
            askers[f"lexical={source}"] = assembly_pb2_grpc.AssemblyServiceStub(channels[-1])
        stats = ReplayStats()
        started = time.perf_counter()
        per_user = await asyncio.gather(
            *(
                run_user(
                    stubs,
                    h,
                    askers=askers,
                    budgets=BUDGETS,
                    stats=stats,
                    concurrency=args.concurrency,
                    openviking_url=openviking_url,
                )
                for h in histories
            )
        )
        answers = [a for user_answers in per_user for a in user_answers]
        replay_seconds = time.perf_counter() - started
        latency = {"AfterTurn during replay": p50_ms(stats.after_turn_seconds)}
        for callers in (1, 8):
            finds = await find_latency(openviking_url, histories, args.latency_n, callers)
            latency[f"OpenViking find ({callers} callers)"] = p50_ms(finds)
            assembles = await assemble_latency(stubs, histories, args.latency_n, callers)
            latency[f"Assemble ({callers} callers)"] = p50_ms(assembles)
        for channel in channels:
            await channel.close()
    finally:
        for started_procs in (procs, *variants.values()):
            stop_engine(started_procs)
    if llm_openviking_url:
        answers += await llm_answers(
            llm_openviking_url, log_dir, histories[: args.llm_users], budgets=BUDGETS,
            concurrency=args.concurrency, engine_env=ENGINE_ENV,
        )  # fmt: skip
    return {
        "workload": {
            "users": args.users,
            "sessions_per_user": args.sessions,
            "questions": sum(len(h.questions) for h in histories),
            "seed": args.seed,
            "replay_seconds": round(replay_seconds, 1),
        },
        "engine": engine_rows(answers, KINDS),
        "baselines": baseline_rows(histories, counter),
        "latency": latency,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--latency-n", type=int, default=30)
    parser.add_argument(
        "--openviking-url", default="", help="use this OpenViking (else start the local stack)"
    )
    parser.add_argument(
        "--embeddings-url", default="", help="with --openviking-url: its embedder (hard tier, --llm-users)"
    )
    parser.add_argument(
        "--llm-users",
        type=int,
        default=1,
        help="users also replayed over OpenViking with the stand-in LLM (0: none)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument(
        "--lexical-variants",
        nargs="*",
        default=["off", "grep"],
        help="also answer with assembly replicas using these recallLexicalSource values (ablation)",
    )
    parser.add_argument("--tier", choices=("easy", "hard", "both"), default="both")
    parser.add_argument("--hard-users", type=int, default=3, help="hard tier: conversations")
    parser.add_argument("--hard-sessions", type=int, default=SESSIONS, help="hard tier: sessions each")
    parser.add_argument(
        "--ask-by-nickname",
        action="store_true",
        help="hard tier: questions name a speaker by the nickname the conversation uses in greetings",
    )
    parser.add_argument(
        "--scale-exchanges", type=int, default=10_000, help="hard tier: exchanges stored for latency at scale"
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="recall-bench-") as scratch, ExitStack() as stacks:
        openviking_url, embeddings_url = args.openviking_url, args.embeddings_url
        if not openviking_url:
            stack = stacks.enter_context(LocalStack(StackSettings.from_env()))
            openviking_url, embeddings_url = stack.openviking_url, stack.embeddings_url
        if args.tier in ("hard", "both"):
            if not embeddings_url:
                parser.error("the hard tier's dense baseline needs --embeddings-url with --openviking-url")
            hard = asyncio.run(run_hard(args, openviking_url, embeddings_url, Path(scratch)))
            _write(args.out / "recall-hard", hard, hard_markdown(hard))
        if args.tier in ("easy", "both"):
            llm_url = ""
            if args.llm_users and embeddings_url:
                llm_url = stacks.enter_context(
                    llm_openviking(embeddings_url, Path(scratch) / "openviking-llm")
                )
            report = asyncio.run(run(args, openviking_url, Path(scratch), llm_url))
            _write(args.out / "recall", report, markdown(report))


def _write(stem: Path, report: dict[str, object], text: str) -> None:
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2))
    stem.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
