"""The Phase-3 benchmark: skill memory, tool memory and recall intent, each next to a baseline.

`python -m tests.bench.phase3 [--skills 200 --tasks 100 ...] [--openviking-url URL]` starts the
local stack (or uses the given OpenViking), serves the AssemblyService in process over real gRPC
and writes `bench-results/phase3.{json,md}`:

- skills: 200 registered skills (`tests.bench.phase3_data`); the share of generated tasks whose
  skill is in the assembled context at a 1k recall budget, and of chit-chat prompts with no skill
  at all, next to a plain `find` over the skill space whose top-k SKILL.md bodies are put in
  within the same 1k (k = 3 and 10);
- tools: per case a user whose tool failed with an error and then worked; the share of next
  prompts (naming the tool, or a tool-loop iteration calling it) whose context holds the error
  and the fix, next to the engine without tool memory (nothing tells it); leaks: another user's
  contexts holding any of this user's error texts or secrets;
- intent: a mixed prompt stream over one conversation; recall `find` calls (counted at the HTTP
  boundary) and recalled tokens for the prompts that need no recall, next to recalling on every
  prompt and to the engine's earlier rules (greetings and too-short prompts only);
- latency: Assemble p50 with every source on (a task prompt at the start of a stream: memories,
  exchanges, summaries, skills, tools, directory) next to one `find` of the same prompt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from contextengine.v1 import assembly_pb2, assembly_pb2_grpc, common_pb2
from grpc import aio

from services.assembly.recall_query import recall_query
from services.capture.skill_registry import register_skills
from shared.config import Settings
from shared.domain.documents import DocumentStore, DocumentUpdates
from shared.domain.skills import SKILL_ROOT, Skill, parse_skill_md
from shared.domain.tool_experience import record_tool_outcomes
from shared.localstack.stack import LocalStack, StackSettings
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from shared.tokens import TokenCounter
from tests.assembly.conftest import assembly_stub
from tests.bench import phase3_data as data
from tests.bench.engine import start_engine, stop_engine
from tests.bench.phase3_latency import (
    PACE_SECONDS,
    Timed,
    assemble_latency,
    latency_markdown,
    paced_latency,
    paced_markdown,
)
from tests.support.call_log import CallLog

RECALL_BUDGET = 1000
TOKEN_BUDGET = 16_000
SETTINGS = Settings(shutdown_grace_seconds=0.1, recall_timeout_ms=30_000, recall_token_budget=RECALL_BUDGET)
ENGINE_ENV = {
    "CONTEXT_ENGINE_RECALL_TIMEOUT_MS": str(SETTINGS.recall_timeout_ms),
    "CONTEXT_ENGINE_RECALL_TOKEN_BUDGET": str(RECALL_BUDGET),
}
"""The deployed replica's settings: the in-process one's (`SETTINGS`)."""
DEPLOYED, IN_PROCESS = "deployed", "in_process"
REPLICA_LABELS = {DEPLOYED: "own process (as deployed)", IN_PROCESS: "in the bench's process"}
Row = dict[str, Any]


def _text(role: common_pb2.MessageRole.ValueType, text: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        role=role, content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))]
    )


def _user(text: str) -> common_pb2.ConversationMessage:
    return _text(common_pb2.MESSAGE_ROLE_USER, text)


def _assistant(text: str) -> common_pb2.ConversationMessage:
    return _text(common_pb2.MESSAGE_ROLE_ASSISTANT, text)


def _call(call_id: str, name: str, arguments: str) -> common_pb2.ConversationMessage:
    block = common_pb2.ToolCallBlock(id=call_id, name=name, arguments=common_pb2.JsonValue(json=arguments))
    return common_pb2.ConversationMessage(
        role=common_pb2.MESSAGE_ROLE_ASSISTANT, content=[common_pb2.ContentBlock(tool_call=block)]
    )


def _result(call_id: str, name: str, output: str, *, is_error: bool) -> common_pb2.ConversationMessage:
    block = common_pb2.ToolResultBlock(
        tool_call_id=call_id,
        tool_name=name,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=output))],
        is_error=is_error,
    )
    return common_pb2.ConversationMessage(
        role=common_pb2.MESSAGE_ROLE_TOOL_RESULT, content=[common_pb2.ContentBlock(tool_result=block)]
    )


def _request(
    tenant: Tenant, prompt: str, history: Sequence[common_pb2.ConversationMessage], session: str = "s1"
) -> assembly_pb2.AssembleRequest:
    identity = common_pb2.Identity(
        account_id=tenant.account_id, user_id=tenant.user_id, agent_id="main", session_id=session
    )
    messages = [*history, _user(prompt)] if prompt else list(history)
    return assembly_pb2.AssembleRequest(
        identity=identity, messages=messages, prompt=prompt, token_budget=TOKEN_BUDGET
    )


def _seen(reply: assembly_pb2.AssembleResponse) -> str:
    """Everything the model reads besides the host's own messages."""
    injected = " ".join(
        b.text.text for m in reply.packet.injected_messages for b in m.content if b.HasField("text")
    )
    return f"{reply.system_prompt_addition}\n{injected}"


async def bench_skills(
    client: OpenVikingClient, stubs: Mapping[str, Any], args: argparse.Namespace, counter: TokenCounter
) -> Row:
    """Quality through the in-process replica; latency through both (`phase3_latency`)."""
    stub = stubs[IN_PROCESS]
    tenant = Tenant(f"p3-skills-{uuid.uuid4().hex[:6]}", "user-1")
    generated = data.skills(args.skills)
    started = time.monotonic()
    await register_skills(
        client,
        DocumentStore(client),
        tenant,
        [Skill(s.name, s.description, s.body, s.host_uri) for s in generated],
        deadline=time.monotonic() + 900,
    )
    register_seconds = time.monotonic() - started
    tasks = data.skill_tasks(generated, args.tasks, args.seed)
    replicas = {name: _assembler(stub, tenant) for name, stub in stubs.items()}
    engine_hits = shown = engine_tokens = 0
    baseline: dict[int, list[int]] = {3: [0, 0], 10: [0, 0]}
    for index, task in enumerate(tasks):
        reply = await stub.Assemble(_request(tenant, task.prompt, [], session=f"t{index}"), timeout=60)
        names = [s.name for s in reply.packet.skills]
        engine_hits += task.skill in names
        shown += len(names)
        engine_tokens += reply.packet.tokens.skills
        found = await client.find(tenant, task.prompt, target_uri=SKILL_ROOT, limit=10, read_content=True)
        for k, tally in baseline.items():
            inside, tokens = _baseline_bodies(found.skills[:k], counter)
            tally[0] += task.skill in inside
            tally[1] += tokens
    chats = data.CHIT_CHAT[: args.chats]
    engine_quiet = baseline_quiet = 0
    for index, prompt in enumerate(chats):
        reply = await stub.Assemble(_request(tenant, prompt, [], session=f"c{index}"), timeout=60)
        engine_quiet += not reply.packet.skills
        found = await client.find(tenant, prompt, target_uri=SKILL_ROOT, limit=3, read_content=True)
        baseline_quiet += not found.skills
    n, c = len(tasks), len(chats)
    return {
        "account": tenant.account_id,
        "skills": len(generated),
        "register_seconds": round(register_seconds, 1),
        "tasks": n,
        "chats": c,
        "engine": {
            "task_hit": engine_hits / n,
            "chat_no_skill": engine_quiet / c,
            "skills_shown_mean": shown / n,
            "tokens_mean": engine_tokens / n,
        },
        "baseline": {
            f"find_top{k}": {
                "task_hit": hits / n,
                "chat_no_skill": baseline_quiet / c,
                "tokens_mean": tokens / n,
            }
            for k, (hits, tokens) in baseline.items()
        },
        "latency": await assemble_latency(client, tenant, tasks, replicas),
        "paced": await paced_latency(client, tenant, tasks[: args.paced], replicas, args.pace_seconds),
    }


def _assembler(stub: Any, tenant: Tenant) -> Timed:
    def assemble(prompt: str, session: str) -> Awaitable[Any]:
        return stub.Assemble(_request(tenant, prompt, [], session=session), timeout=60)  # type: ignore[no-any-return]

    return assemble


def _baseline_bodies(hits: Sequence[Any], counter: TokenCounter) -> tuple[list[str], int]:
    """The plain baseline: SKILL.md bodies of the top hits, in order, while they fit 1k tokens."""
    inside, used = [], 0
    for hit in hits:
        skill = parse_skill_md(hit.content or "")
        if skill is None:
            continue
        tokens = counter.count(hit.content or "")
        if used + tokens > RECALL_BUDGET:
            break
        inside.append(skill.name)
        used += tokens
    return inside, used


async def bench_tools(client: OpenVikingClient, stub: Any, args: argparse.Namespace) -> Row:
    account = f"p3-tools-{uuid.uuid4().hex[:6]}"
    tools = DocumentUpdates(DocumentStore(client))
    told = leaks = 0
    cases = data.tool_cases(args.tool_cases, args.seed)
    for index, case in enumerate(cases):
        owner, other = Tenant(account, f"owner-{index}"), Tenant(account, f"other-{index}")
        secret = f"secret-{uuid.uuid4().hex[:10]}"
        error = f"{case.error} ({secret})"
        turn = [
            _user("do the job"),
            _call("c1", case.tool, case.failing_arguments),
            _result("c1", case.tool, error, is_error=True),
            _call("c2", case.tool, case.fixed_arguments),
            _result("c2", case.tool, f"RAW {secret}", is_error=False),
        ]
        await record_tool_outcomes(tools, owner, turn)
        await record_tool_outcomes(
            tools,
            other,
            [
                _user("x"),
                _call("o1", case.tool, "{}"),
                _result("o1", case.tool, "other failure", is_error=True),
            ],
        )
        history = (
            [_user("do the job"), _call("c3", case.tool, case.fixed_arguments)]
            if case.via_recent_call
            else []
        )
        prompt = "" if case.via_recent_call else case.next_prompt
        reply = await stub.Assemble(_request(owner, prompt, history, session=f"s{index}"), timeout=60)
        seen = _seen(reply)
        told += case.error in seen and "then worked with" in seen
        for other_prompt in (case.next_prompt, f"Use {case.tool} now"):
            other_reply = await stub.Assemble(
                _request(other, other_prompt, [], session=f"o{index}"), timeout=60
            )
            leaks += secret in _seen(other_reply) or secret in str(other_reply.packet)
    return {
        "cases": len(cases),
        "engine": {"told": told / len(cases)},
        "baseline": {"told": 0.0},
        "leaks": leaks,
    }


async def bench_intent(client: OpenVikingClient, log: CallLog, stub: Any, args: argparse.Namespace) -> Row:
    """Recall calls and tokens for the stream's prompts that need no recall (the user has memories)."""
    tenant = Tenant(f"p3-intent-{uuid.uuid4().hex[:6]}", "user-1")
    for index, fact in enumerate(data.MEMORIES):  # what recall spends its tokens on
        await client.write(tenant, f"viking://~/memories/notes/fact-{index}.md", fact, wait=True)
    history = [_user("How should we plan the party?"), _assistant(data.ASSISTANT_ANSWER)]
    stream = data.mixed_stream(args.stream, args.seed)
    engine_calls = engine_tokens = every_calls = every_tokens = rules_calls = rules_tokens = 0
    missed = 0
    for prompt, needs in stream:
        mark = log.mark()
        reply = await stub.Assemble(_request(tenant, prompt, history), timeout=60)
        finds = sum(1 for c in log.calls[mark:] if c.route.endswith("/search/find"))
        if needs:
            missed += not reply.packet.recall_intent.recall
            continue
        engine_calls += finds
        engine_tokens += reply.packet.tokens.recall
        # Baselines: recall on every prompt, and the earlier rules (greetings, too short).
        recalled = await stub.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=_request(tenant, prompt, []).identity, query=prompt),
            timeout=60,
        )
        tokens = (
            TokenCounter.for_model("", "cl100k_base").count(recalled.tool_result.json)
            if recalled.memories
            else 0
        )
        every_calls, every_tokens = every_calls + 1, every_tokens + tokens
        if not recall_query(reversed(_request(tenant, prompt, history).messages), 5, prompt).skip_reason:
            rules_calls, rules_tokens = rules_calls + 1, rules_tokens + tokens
    quiet = sum(1 for _, needs in stream if not needs)
    return {
        "prompts": len(stream),
        "no_recall_prompts": quiet,
        "needs_recall_skipped": missed,
        "engine": {"recall_calls": engine_calls, "recall_tokens": engine_tokens},
        "baseline_every_prompt": {"recall_calls": every_calls, "recall_tokens": every_tokens},
        "baseline_earlier_rules": {"recall_calls": rules_calls, "recall_tokens": rules_tokens},
        "calls_drop_vs_every_prompt": 1 - engine_calls / every_calls if every_calls else 1.0,
        "calls_drop_vs_earlier_rules": 1 - engine_calls / rules_calls if rules_calls else 1.0,
    }


async def run(args: argparse.Namespace, openviking_url: str) -> Row:
    log = CallLog()
    counter = TokenCounter.for_model("", "cl100k_base")
    procs = start_engine(openviking_url, args.out, ENGINE_ENV, services=("assembly",))
    try:
        async with (
            OpenVikingClient(openviking_url, DevAuth(), middlewares=[log]) as client,
            assembly_stub(SETTINGS, client, as_deployed=True) as stub,
            aio.insecure_channel(procs["assembly"].address) as channel,
        ):
            stubs = {DEPLOYED: assembly_pb2_grpc.AssemblyServiceStub(channel), IN_PROCESS: stub}
            return {
                "skills": await bench_skills(client, stubs, args, counter),
                "tools": await bench_tools(client, stub, args),
                "intent": await bench_intent(client, log, stub, args),
            }
    finally:
        stop_engine(procs)


def markdown(report: Row) -> str:
    s, t, i = report["skills"], report["tools"], report["intent"]
    lines = [
        "# Phase 3 benchmark",
        "",
        f"## Skills ({s['skills']} registered in {s['register_seconds']} s; {s['tasks']} tasks, "
        f"{s['chats']} chit-chat, {RECALL_BUDGET}-token recall budget)",
        "",
        "| variant | task's skill in context | chit-chat with no skill | skill tokens per task |",
        "|---|---|---|---|",
    ]
    for name, row in [("engine", s["engine"]), *((f"{k} bodies", v) for k, v in s["baseline"].items())]:
        lines.append(
            f"| {name} | {row['task_hit']:.0%} | {row['chat_no_skill']:.0%} | {row['tokens_mean']:.0f} |"
        )
    lines += [
        "",
        f"Skills shown per task: {s['engine']['skills_shown_mean']:.1f}.",
        "",
        *latency_markdown(s["latency"], REPLICA_LABELS),
        "",
        *paced_markdown(s["paced"], REPLICA_LABELS),
        "",
        f"## Tools ({t['cases']} cases)",
        "",
        "| variant | failure and fix in context | other users' results leaked |",
        "|---|---|---|",
        f"| engine | {t['engine']['told']:.0%} | {t['leaks']} |",
        f"| without tool memory | {t['baseline']['told']:.0%} | - |",
        "",
        f"## Recall intent ({i['prompts']} prompts, {i['no_recall_prompts']} needing no recall; "
        f"{i['needs_recall_skipped']} needing recall skipped)",
        "",
        "| variant | recall calls (no-recall prompts) | recall tokens (no-recall prompts) |",
        "|---|---|---|",
        f"| engine | {i['engine']['recall_calls']} | {i['engine']['recall_tokens']} |",
        f"| recall on every prompt | {i['baseline_every_prompt']['recall_calls']} | "
        f"{i['baseline_every_prompt']['recall_tokens']} |",
        f"| earlier rules (greeting, too short) | {i['baseline_earlier_rules']['recall_calls']} | "
        f"{i['baseline_earlier_rules']['recall_tokens']} |",
        "",
        f"Recall calls down {i['calls_drop_vs_every_prompt']:.0%} against recalling on every prompt, "
        f"{i['calls_drop_vs_earlier_rules']:.0%} against the earlier rules.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skills", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--chats", type=int, default=len(data.CHIT_CHAT))
    parser.add_argument("--tool-cases", type=int, default=24)
    parser.add_argument("--stream", type=int, default=60)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--paced", type=int, default=6, help="tasks timed at a host's pace")
    parser.add_argument("--pace-seconds", type=float, default=PACE_SECONDS, help="quiet before each")
    parser.add_argument(
        "--openviking-url", default="", help="use this OpenViking (else start the local stack)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stacks:
        url = args.openviking_url
        if not url:
            url = stacks.enter_context(LocalStack(StackSettings.from_env())).openviking_url
        report = asyncio.run(run(args, url))
    (args.out / "phase3.json").write_text(json.dumps(report, indent=2))
    text = markdown(report)
    (args.out / "phase3.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
