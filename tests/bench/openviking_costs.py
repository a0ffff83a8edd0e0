"""What each kind of OpenViking call costs OpenViking's own process in CPU: which of the engine's
calls are worth saving.

Starts a private local stack (temp data dir, free ports, no LLM) and makes each kind of call the
engine makes, through the engine's own client, one after another: a stream state's read and its
compare-and-swap write (`DocumentStore`), a 100-byte document's write, a session append of one
exchange, a turn-index document (embedded) alone and four in one call, recall's `find` (limit
`TURN_CANDIDATES`), `fs/ls`, `fs/mkdir`. Per kind: OpenViking's CPU per call (from /proc, read
once its queues are quiet again, so deferred work counts), the embedding server's, and the wall
time per call. Twice, each on a stack of its own and in the same run: OpenViking as the engine
ships it (usage audit off: `shared.localstack.openviking_config`) and with OpenViking's default
configuration (usage audit on), so the saving shows beside its baseline.

    python -m tests.bench.openviking_costs [--calls 120] [--out bench-results]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from services.assembly.recall import TURN_CANDIDATES, USER_MEMORIES_URI
from shared.domain.documents import ENGINE_ROOT, DocumentStore
from shared.domain.turn_index import TURN_INDEX_ROOT, TURN_PROCESSING_MODE
from shared.localstack.stack import LocalStack, StackSettings
from shared.openviking import DevAuth, OpenVikingClient
from shared.openviking.models.parts import NewMessage
from shared.openviking.tenant import Tenant
from tests.bench.cpu import CpuMeter

STATE = {"pending_write": {"outbox": ["a host message of a few hundred characters " * 8] * 3}, "turns": 12}
"""About the size of a stream state holding a turn's outbox."""
Call = Callable[[int], Awaitable[Any]]


async def measure(meter: CpuMeter, name: str, calls: int, call: Call) -> dict[str, Any]:
    await meter.quiet("openviking", "embeddings")
    before = meter.snapshot()
    started = time.perf_counter()
    for i in range(calls):
        await call(i)
    wall = time.perf_counter() - started
    await meter.quiet("openviking", "embeddings")
    spent = meter.since(before)
    row = {
        "call": name,
        "calls": calls,
        "openviking_cpu_ms": round(spent["openviking"] * 1000 / calls, 2),
        "embeddings_cpu_ms": round(spent["embeddings"] * 1000 / calls, 2),
        "wall_ms": round(wall * 1000 / calls, 2),
    }
    print(json.dumps(row), flush=True)
    return row


async def run(url: str, meter: CpuMeter, calls: int) -> list[dict[str, Any]]:
    tenant = Tenant(f"costs-{uuid.uuid4().hex[:6]}", "user-1")
    async with OpenVikingClient(url, DevAuth()) as client:
        documents = DocumentStore(client)
        state_uri = f"{ENGINE_ROOT}/costs/state.json"
        sha = await documents.write(tenant, state_uri, STATE)
        session = (await client.create_session(tenant)).session_id
        await client.mkdir(tenant, TURN_INDEX_ROOT)

        async def state_write(i: int) -> None:
            nonlocal sha
            sha = await documents.write(tenant, state_uri, {**STATE, "turns": i}, expected_sha256=sha)

        async def small_write(i: int) -> None:
            await documents.write(tenant, f"{ENGINE_ROOT}/costs/small.json", {"turns": i})

        async def append(i: int) -> None:
            exchange = [
                NewMessage(role="user", content=f"question {i} " * 30),
                NewMessage(role="assistant", content="an answer " * 40),
            ]
            await client.add_messages(tenant, session, exchange)

        def turn_operation(name: str) -> dict[str, Any]:
            text = (
                f"[2026-12-06] user: question {name} about the migration plan\nassistant: {'an answer ' * 30}"
            )
            return {"uri": f"{TURN_INDEX_ROOT}/costs/t{name}.md", "content": text, "mode": "replace"}

        async def turn_documents(operations: list[dict[str, Any]]) -> None:
            await client.batch_write(
                tenant, TURN_INDEX_ROOT, operations, wait=False, processing_mode=TURN_PROCESSING_MODE
            )

        async def find(i: int) -> None:
            query = f"what did we decide on migration {i}"
            await client.find(
                tenant, query, target_uri=USER_MEMORIES_URI, limit=TURN_CANDIDATES, score_threshold=0.0
            )

        kinds: list[tuple[str, Call]] = [
            ("content/read: a stream state", lambda i: documents.read(tenant, state_uri)),
            ("content/batch-write: a stream state (compare-and-swap, deferred processing)", state_write),
            ("content/batch-write: a 100-byte document", small_write),
            ("sessions/messages/batch: one exchange", append),
            (
                "content/batch-write: a turn-index document (embedded)",
                lambda i: turn_documents([turn_operation(f"{i}")]),
            ),
            (
                "content/batch-write: four turn-index documents in one call (capture's batches)",
                lambda i: turn_documents([turn_operation(f"{i}-{k}") for k in range(4)]),
            ),
            (f"search/find: limit {TURN_CANDIDATES}", find),
            ("fs/ls: a folder", lambda i: client.ls(tenant, f"{ENGINE_ROOT}/costs")),
            ("fs/mkdir: a new folder", lambda i: client.mkdir(tenant, f"{ENGINE_ROOT}/costs/d{i}")),
        ]
        return [await measure(meter, name, calls, call) for name, call in kinds]


CONFIGURATIONS = (("shipped", False), ("openviking_default", True))
"""Each run's OpenViking configurations: (name, usage audit on)."""


def markdown(runs: dict[str, list[dict[str, Any]]]) -> str:
    lines = [
        "| call (the engine's client) | OpenViking CPU ms/call, as shipped (usage audit off) | "
        "OpenViking CPU ms/call, its default (usage audit on) | embedder CPU ms/call | wall ms/call, "
        "shipped / default |",
        "|---|---:|---:|---:|---:|",
    ]
    for shipped, default in zip(runs["shipped"], runs["openviking_default"], strict=True):
        lines.append(
            f"| {shipped['call']} | {shipped['openviking_cpu_ms']:.1f} | {default['openviking_cpu_ms']:.1f} "
            f"| {shipped['embeddings_cpu_ms']:.1f} | {shipped['wall_ms']:.1f} / {default['wall_ms']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def measure_stack(usage_audit: bool, calls: int) -> list[dict[str, Any]]:
    """Every kind of call on a private stack whose OpenViking has the usage audit on or off."""
    data_dir = Path(tempfile.mkdtemp(prefix="ce-costs-ov-"))
    try:
        settings = StackSettings(
            openviking_data_dir=data_dir,
            openviking_port=0,
            embeddings_port=0,
            llm=None,
            openviking_usage_audit=usage_audit,
        )
        with LocalStack(settings) as stack:
            meter = CpuMeter({m.spec.name: m.pid for m in stack.processes})
            return asyncio.run(run(stack.openviking_url, meter, calls))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=120, help="calls per kind")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {name: measure_stack(usage_audit, args.calls) for name, usage_audit in CONFIGURATIONS}
    (args.out / "openviking-costs.json").write_text(json.dumps(runs, indent=2))
    text = markdown(runs)
    (args.out / "openviking-costs.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
