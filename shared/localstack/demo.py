"""`make run`: the local stack plus the three services (all-in-one) and a demo host conversation.

Starts the embedding endpoint and OpenViking (installing them on first use), starts the engine,
then plays a host through the public gRPC API: turns with tool calls, an explicit memory, a
compaction, a new session that recalls what the first decided, and an expand back to the raw
turns. The stack stays up until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

import grpc
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
    envelope_pb2,
)
from google.protobuf.json_format import MessageToDict

from shared.config import load_settings
from shared.domain.conversation import text_message, tool_call_message, tool_result_message
from shared.errors import ConfigurationError
from shared.localstack.errors import LocalStackError
from shared.localstack.ports import GRPC_PORT_ENV, ensure_free
from shared.localstack.stack import LocalStack, StackSettings
from shared.runtime.main import start_host

Role = common_pb2.MessageRole
AGENT = "main"
BUDGET = 8000


def demo_user() -> str:
    """A user of this run alone: a rerun recalls nothing of an earlier run (OpenViking's data is kept)."""
    return "demo-user-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def _identity(user: str, session_id: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id="demo", user_id=user, agent_id=AGENT, session_id=session_id)


# (user text, optional tool exchange, assistant answer) per turn of the first session.
FIRST_SESSION: list[tuple[str, tuple[str, Mapping[str, object], str] | None, str]] = [
    (
        "Our queries on the orders table in project Atlas are slow. What should we look at?",
        (
            "search_docs",
            {"query": "orders table slow query", "limit": 3},
            "EXPLAIN shows a sequential scan on orders.customer_id",
        ),
        "Add an index on orders(customer_id), then check EXPLAIN ANALYZE: the slow query scans sequentially.",
    ),
    (
        "We decided to use PostgreSQL 16 for project Atlas instead of MySQL.",
        None,
        "Noted: project Atlas will run on PostgreSQL 16.",
    ),
    (
        "Can you check the connection pool settings for Atlas?",
        ("read_file", {"path": "atlas/config/db.yaml"}, "pool_size: 5\nmax_overflow: 0"),
        "The pool is small (5, no overflow); raise pool_size to 20 for the API workers.",
    ),
]


def _section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)), flush=True)


def _show(label: str, message: object, keys: tuple[str, ...] = ()) -> None:
    # Fields at their default are shown too: StoreMemory's `created: false` is the dedup's answer.
    data = MessageToDict(
        message,  # type: ignore[arg-type]
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
    )
    shown = {k: data[k] for k in keys if k in data} if keys else data
    print(textwrap.indent(f"{label}: {json.dumps(shown, ensure_ascii=False, indent=2)}", "  "), flush=True)


def _show_messages(messages: list[common_pb2.ConversationMessage]) -> None:
    for message in messages:
        role = Role.Name(message.role).removeprefix("MESSAGE_ROLE_").lower()
        for block in message.content:
            kind = block.WhichOneof("block")
            if kind == "text":
                body = block.text.text
            elif kind == "tool_call":
                body = f"[tool_call {block.tool_call.name}] {block.tool_call.arguments.json}"
            elif kind == "tool_result":
                body = f"[tool_result {block.tool_result.tool_name}] " + " ".join(
                    c.text.text for c in block.tool_result.content
                )
            else:
                body = f"[{kind}]"
            print(f"    {role:>11}: {textwrap.shorten(body, 150)}", flush=True)


def _part_text(turn: envelope_pb2.TurnEnvelope) -> str:
    for part in turn.parts:
        kind = part.WhichOneof("part")
        if kind == "text":
            return textwrap.shorten(part.text.text, 110)
        if kind == "tool_call":
            return f"[tool_call {part.tool_call.tool_name}] {part.tool_call.arguments.json}"
        if kind == "tool_result":
            return textwrap.shorten(
                f"[tool_result {part.tool_result.tool_name}] {part.tool_result.result.json}", 110
            )
    return ""


async def play(target: str, user: str) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        capture = capture_pb2_grpc.CaptureServiceStub(channel)
        assembly = assembly_pb2_grpc.AssemblyServiceStub(channel)
        compaction = compaction_pb2_grpc.CompactionServiceStub(channel)
        print(f"demo user {user} (new on every run)", flush=True)
        first = _identity(user, "demo-1")
        transcript: list[common_pb2.ConversationMessage] = []
        for index, (question, tool, answer) in enumerate(FIRST_SESSION):
            _section(f"session 1, turn {index + 1}")
            before = len(transcript)
            transcript.append(text_message(Role.MESSAGE_ROLE_USER, question, f"u{index}"))
            assembled = await assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=first, messages=transcript, token_budget=BUDGET, model="gpt-4o", prompt=question
                )
            )
            print(
                f"  Assemble -> {len(assembled.messages)} messages, {assembled.estimated_tokens} tokens",
                flush=True,
            )
            _show_messages(list(assembled.messages))
            if tool is not None:
                name, arguments, output = tool
                transcript.append(tool_call_message(f"a{index}c", f"call{index}x01", name, arguments))
                transcript.append(tool_result_message(f"t{index}", f"call{index}x01", name, output))
            transcript.append(text_message(Role.MESSAGE_ROLE_ASSISTANT, answer, f"a{index}"))
            after = await capture.AfterTurn(
                capture_pb2.AfterTurnRequest(
                    identity=first,
                    messages=transcript,
                    pre_prompt_message_count=before,
                    token_budget=BUDGET,
                    model="gpt-4o",
                )
            )
            _show("AfterTurn", after)

        _section("explicit memory_store")
        for text in (
            "I prefer dark theme in every UI.",
            "Decision: project Atlas uses PostgreSQL 16, not MySQL.",
        ):
            stored = await capture.StoreMemory(capture_pb2.StoreMemoryRequest(identity=first, text=text))
            _show("StoreMemory", stored)

        _section("compaction (OpenViking session.commit)")
        compacted = await compaction.Compact(
            compaction_pb2.CompactRequest(identity=first, token_budget=BUDGET, force=True, model="gpt-4o"),
            timeout=180,
        )
        _show(
            "Compact",
            compacted,
            ("ok", "compacted", "reason", "checkpoint", "summary", "tokens_before", "tokens_after"),
        )
        print("  new working context:", flush=True)
        _show_messages(list(compacted.messages))

        _section("session 2 recalls what session 1 decided")
        second = _identity(user, "demo-2")
        question = "What did we decide about the database for project Atlas?"
        assembled = await assembly.Assemble(
            assembly_pb2.AssembleRequest(
                identity=second,
                messages=[text_message(Role.MESSAGE_ROLE_USER, question, "s2u0")],
                token_budget=BUDGET,
                model="gpt-4o",
                prompt=question,
            )
        )
        _show_messages(list(assembled.messages))
        _show("packet", assembled.packet, ("recall_query", "recalled_memories", "tokens", "degraded"))
        recalled_turn = next((m for m in assembled.packet.recalled_memories if m.kind == "turn"), None)
        if recalled_turn is not None:
            print(f"  the recalled exchange said at {recalled_turn.said_at}, expanded:", flush=True)
            original = await compaction.ExpandMemory(
                compaction_pb2.ExpandMemoryRequest(identity=second, summary_or_memory_uri=recalled_turn.uri)
            )
            for expanded_turn in original.turns:
                print(f"    #{expanded_turn.turn.sequence} {_part_text(expanded_turn.turn)}", flush=True)

        _section("memory_expand back to the raw turns")
        checkpoint = compacted.checkpoint
        uri = checkpoint.archive_uri or checkpoint.checkpoint_id
        if not uri:
            print(f"  nothing was compacted ({compacted.reason}); no archive to expand", flush=True)
            return
        expanded = await compaction.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(
                identity=first, summary_or_memory_uri=uri, query="slow query index", limit=4
            )
        )
        _show("ExpandMemory", expanded, ("linked_uris", "readable_uris", "checkpoint_id"))
        print(f"  raw turns from {expanded.readable_uris[0] if expanded.readable_uris else '?'}:", flush=True)
        for expanded_turn in expanded.turns:
            turn = expanded_turn.turn
            role = envelope_pb2.EnvelopeRole.Name(turn.role).removeprefix("ENVELOPE_ROLE_").lower()
            print(
                f"    #{turn.sequence} score={expanded_turn.match_score:.2f} {role}: {_part_text(turn)}",
                flush=True,
            )


async def main() -> None:
    settings = load_settings()
    # The engine's port is checked first: finding it taken after minutes of installing would waste them.
    ensure_free(settings.grpc_port, "the engine's gRPC server", GRPC_PORT_ENV, settings.grpc_host)
    stack_settings = replace(StackSettings.from_env(), openviking_port=settings.port)
    with LocalStack(stack_settings) as stack:
        settings = settings.model_copy(update={"base_url": stack.openviking_url})
        host = await start_host(settings, "all")
        print(f"\nengine (capture + assembly + compaction) listening on {host.address}", flush=True)
        print(f"OpenViking {stack.openviking_url}; {stack.extraction_description}", flush=True)
        try:
            await play(host.address, demo_user())
            _section("demo finished; the stack stays up until Ctrl-C")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
        finally:
            print("stopping…", flush=True)
            await host.stop()


def run() -> int:
    """`make run`'s exit status; a setup problem is one line on stderr, not a traceback."""
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass  # Ctrl-C before the demo finished: the stack is stopped all the same.
    except (LocalStackError, ConfigurationError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run())
