"""Seeded, reproducible multi-session conversation workload for the benchmark.

Every session belongs to one of a few users, starts on a topic and drifts to another one at a
random turn. Turns are user text, sometimes a tool call with a tool result of varied size
(80 characters to 6 kB), and an assistant answer. Each session plants one preference or decision
at a known turn; the fact carries a unique *needle* (e.g. ``amber-heron-417``) so the benchmark
can check whether it reached an assembled context. Every other fact is also stored explicitly
with StoreMemory (without an LLM OpenViking extracts nothing from conversation, so explicit
memories are what recall can find).

`python -m tests.bench.workload --sessions 4 --turns 6 --seed 7` prints a sample.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field

TOPICS: dict[str, list[str]] = {
    "database": [
        "postgres",
        "index",
        "query",
        "planner",
        "vacuum",
        "replica",
        "schema",
        "migration",
        "orders",
        "table",
        "latency",
        "connection",
        "pool",
        "transaction",
        "isolation",
        "deadlock",
        "partition",
    ],
    "frontend": [
        "react",
        "component",
        "render",
        "state",
        "hook",
        "bundle",
        "css",
        "layout",
        "accessibility",
        "hydration",
        "webpack",
        "storybook",
        "props",
        "routing",
        "form",
    ],
    "deployment": [
        "kubernetes",
        "pod",
        "rollout",
        "helm",
        "ingress",
        "autoscaler",
        "canary",
        "node",
        "drain",
        "liveness",
        "probe",
        "namespace",
        "secret",
        "configmap",
        "replica",
    ],
    "testing": [
        "pytest",
        "fixture",
        "flaky",
        "coverage",
        "mock",
        "integration",
        "snapshot",
        "parametrize",
        "assertion",
        "ci",
        "runner",
        "timeout",
        "retry",
        "seed",
    ],
    "billing": [
        "invoice",
        "stripe",
        "webhook",
        "refund",
        "currency",
        "tax",
        "subscription",
        "proration",
        "ledger",
        "reconciliation",
        "dunning",
        "coupon",
        "plan",
    ],
    "observability": [
        "trace",
        "span",
        "metric",
        "histogram",
        "dashboard",
        "alert",
        "slo",
        "latency",
        "percentile",
        "log",
        "sampling",
        "exporter",
        "collector",
        "cardinality",
    ],
    "security": [
        "oauth",
        "token",
        "rotation",
        "secret",
        "vault",
        "tls",
        "certificate",
        "audit",
        "rbac",
        "scope",
        "session",
        "csrf",
        "password",
        "hashing",
        "mfa",
    ],
    "data-pipeline": [
        "airflow",
        "dag",
        "spark",
        "parquet",
        "partition",
        "backfill",
        "schema",
        "kafka",
        "topic",
        "consumer",
        "offset",
        "batch",
        "window",
        "dedupe",
    ],
}
ADJECTIVES = [
    "amber",
    "cobalt",
    "crimson",
    "dusty",
    "emerald",
    "frozen",
    "golden",
    "hollow",
    "ivory",
    "jade",
    "lunar",
    "misty",
]
ANIMALS = [
    "heron",
    "otter",
    "lynx",
    "falcon",
    "badger",
    "marten",
    "ibis",
    "gecko",
    "walrus",
    "puffin",
    "tapir",
    "viper",
]
TOOLS = ("read_file", "run_tests", "search_docs", "query_db", "kubectl", "http_get")
TOOL_RESULT_SIZES = (80, 400, 1500, 6000)
"""Characters of a tool result; drawn with weights TOOL_RESULT_WEIGHTS."""
TOOL_RESULT_WEIGHTS = (4, 4, 2, 1)

FACT_TEMPLATES: tuple[tuple[str, str, str, str], ...] = (
    # (kind, planted user text, stored memory text, later question)
    (
        "decision",
        "We decided: the {topic} work ships behind the feature flag named {needle}. Please remember that.",
        "Decision: the {topic} work ships behind the feature flag named {needle}.",
        "Which feature flag did we decide the {topic} work ships behind?",
    ),
    (
        "preference",
        "For anything about {topic}, I prefer the staging cluster called {needle}; always use it.",
        "Preference: for {topic}, the user prefers the staging cluster called {needle}.",
        "Which staging cluster do I prefer for {topic}?",
    ),
    (
        "decision",
        "Decision for {topic}: the on-call rotation is owned by team {needle} from now on.",
        "Decision: the {topic} on-call rotation is owned by team {needle}.",
        "Which team owns the {topic} on-call rotation now?",
    ),
    (
        "preference",
        "I prefer that {topic} reports are posted to the channel #{needle}, not by email.",
        "Preference: {topic} reports go to the channel #{needle}, not email.",
        "Where should {topic} reports be posted?",
    ),
)


@dataclass(frozen=True)
class ToolExchange:
    call_id: str
    name: str
    arguments: dict[str, object]
    output: str


@dataclass(frozen=True)
class Turn:
    index: int
    user: str
    tool: ToolExchange | None
    assistant: str
    topic: str


@dataclass(frozen=True)
class Fact:
    fact_id: str
    kind: str
    user_id: str
    session_id: str
    turn_index: int
    needle: str
    stored: bool
    memory_text: str
    question: str
    topic: str


@dataclass
class Session:
    session_id: str
    user_id: str
    turns: list[Turn] = field(default_factory=list)
    fact: Fact | None = None


@dataclass
class Workload:
    seed: int
    sessions: list[Session]

    @property
    def facts(self) -> list[Fact]:
        return [s.fact for s in self.sessions if s.fact is not None]

    @property
    def users(self) -> list[str]:
        return sorted({s.user_id for s in self.sessions})


def _sentence(rng: random.Random, vocab: list[str], words: int) -> str:
    filler = ["the", "a", "we", "should", "check", "why", "then", "and", "for", "with", "after", "because"]
    out = [rng.choice(vocab) if rng.random() < 0.55 else rng.choice(filler) for _ in range(words)]
    return (" ".join(out)).capitalize() + "."


def _blob(rng: random.Random, vocab: list[str], chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        line = (
            f"{rng.choice(vocab)}_{rng.randint(0, 999)}: {rng.choice(vocab)} {rng.random():.4f} "
            + " ".join(rng.choice(vocab) for _ in range(rng.randint(2, 8)))
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def make_turn(rng: random.Random, session_id: str, index: int, topic: str) -> Turn:
    vocab = TOPICS[topic]
    user = " ".join(_sentence(rng, vocab, rng.randint(8, 30)) for _ in range(rng.randint(1, 3)))
    tool = None
    if rng.random() < 0.5:
        name = rng.choice(TOOLS)
        size = rng.choices(TOOL_RESULT_SIZES, TOOL_RESULT_WEIGHTS)[0]
        tool = ToolExchange(
            call_id=f"call_{session_id}_{index}",
            name=name,
            arguments={"query": " ".join(rng.sample(vocab, 3)), "limit": rng.randint(1, 20)},
            output=_blob(rng, vocab, size),
        )
    assistant = " ".join(_sentence(rng, vocab, rng.randint(10, 40)) for _ in range(rng.randint(1, 4)))
    return Turn(index=index, user=user, tool=tool, assistant=assistant, topic=topic)


def generate(
    sessions: int, turns: int, seed: int, *, prefix: str = "s", users: int | None = None
) -> Workload:
    """`sessions` sessions of `turns` turns; the same arguments always give the same workload."""
    rng = random.Random(seed)
    user_count = users or max(1, min(8, sessions // 4))
    topics = list(TOPICS)
    out: list[Session] = []
    used: set[str] = set()
    for number in range(sessions):
        session_id = f"{prefix}{seed}-{number:04d}"
        user_id = f"bench-user-{number % user_count}"
        session = Session(session_id=session_id, user_id=user_id)
        topic = rng.choice(topics)
        drift_at = rng.randint(max(1, turns // 3), max(1, turns - 1)) if turns > 2 else turns
        plant_at = rng.randint(0, max(0, min(drift_at, turns) - 1))
        template = FACT_TEMPLATES[number % len(FACT_TEMPLATES)]
        needle = ""
        while not needle or needle in used:
            needle = f"{rng.choice(ADJECTIVES)}-{rng.choice(ANIMALS)}-{rng.randint(100, 999)}"
        used.add(needle)
        fact_topic = topic
        for index in range(turns):
            if index == drift_at:
                topic = rng.choice([t for t in topics if t != topic])
            turn = make_turn(rng, session_id, index, topic)
            if index == plant_at:
                planted = template[1].format(topic=fact_topic, needle=needle)
                turn = Turn(index, planted + " " + turn.user, turn.tool, turn.assistant, topic)
            session.turns.append(turn)
        session.fact = Fact(
            fact_id=f"fact-{session_id}",
            kind=template[0],
            user_id=user_id,
            session_id=session_id,
            turn_index=plant_at,
            needle=needle,
            stored=number % 2 == 0,
            memory_text=template[2].format(topic=fact_topic, needle=needle),
            question=template[3].format(topic=fact_topic),
            topic=fact_topic,
        )
        out.append(session)
    return Workload(seed=seed, sessions=out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    workload = generate(args.sessions, args.turns, args.seed)
    for session in workload.sessions:
        print(f"== {session.session_id} ({session.user_id})")
        for turn in session.turns:
            tool = f" [{turn.tool.name} -> {len(turn.tool.output)} chars]" if turn.tool else ""
            print(f"  {turn.index:>3} {turn.topic:<14} {turn.user[:70]!r}{tool}")
        print("  fact:", json.dumps(session.fact.__dict__ if session.fact else None))


if __name__ == "__main__":
    main()
