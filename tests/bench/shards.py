"""`python -m tests.bench.shards`: the engine over 2 OpenViking shards, then with one killed.

Starts the embedding server, two OpenViking servers (shards `ov-0`, `ov-1`, own ports and data
dirs) and the engine (`--service all`, `CONTEXT_ENGINE_OPENVIKING_SHARDS`). `--tenants` users
each replay turns (Assemble, then AfterTurn) at `--concurrency` callers:

1. both shards up: tenants per shard, per-shard turns/s, p50/p95 of a turn, Assemble, AfterTurn;
   before that, the same tenants and callers on one server (the single `baseUrl` config), so the
   sharded numbers sit beside what one server does in the same run;
2. `ov-1` killed (SIGKILL): per-shard errors. `ov-0`'s tenants must see 0 errors and no
   degraded Assemble; `ov-1`'s get UNAVAILABLE AfterTurns and degraded Assembles.

Prints a table and writes `bench-results/shards.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    common_pb2,
)

from shared.localstack.components import embeddings_base_url, embeddings_process
from shared.localstack.embedders import embedder_from_env
from shared.localstack.layout import StackLayout
from shared.localstack.processes import ManagedProcess, free_port
from shared.localstack.runtimes import OPENVIKING_RUNTIME, provision
from shared.openviking import Tenant
from shared.openviking.shards import DEFAULT_SHARD, ShardMap
from tests.bench.workload import TOPICS, make_turn
from tests.support.shards import OpenVikingShards, running_shards

ACCOUNT = "shardbench"
REPO = Path(__file__).resolve().parents[2]
SHARDS = ("ov-0", "ov-1")
KILLED = "ov-1"


def log(message: str) -> None:
    print(f"[shards {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class ShardTally:
    """What one shard's tenants saw in a phase."""

    tenants: int = 0
    turns: list[float] = field(default_factory=list)
    assemble: list[float] = field(default_factory=list)
    after_turn: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    degraded: int = 0

    def summary(self, wall_s: float) -> dict[str, Any]:
        return {
            "tenants": self.tenants,
            "turns": len(self.turns),
            "turns_per_s": round(len(self.turns) / wall_s, 2) if wall_s else None,
            "turn_p50_ms": _p(self.turns, 50),
            "turn_p95_ms": _p(self.turns, 95),
            "assemble_p50_ms": _p(self.assemble, 50),
            "after_turn_p50_ms": _p(self.after_turn, 50),
            "errors": len(self.errors),
            "error_samples": sorted(set(self.errors))[:2],
            "degraded_assembles": self.degraded,
        }


def _p(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return round(values[0], 1) if values else None
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 1)


def _message(
    role: common_pb2.MessageRole.ValueType, msg_id: str, text: str
) -> common_pb2.ConversationMessage:
    block = common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))
    return common_pb2.ConversationMessage(id=msg_id, role=role, content=[block])


@dataclass
class Driver:
    """Replays turns for tenants through one engine and tallies them by the tenant's shard."""

    channel: grpc.aio.Channel
    shard_of: dict[str, str]
    """Tenant (user id) -> shard name."""
    session: str
    history: dict[str, list[common_pb2.ConversationMessage]] = field(default_factory=dict)

    async def turn(self, user: str, index: int, tally: ShardTally) -> None:
        rng = random.Random(f"{user}/{index}")
        turn = make_turn(rng, f"{user}-{self.session}", index, rng.choice(sorted(TOPICS)))
        ident = common_pb2.Identity(
            account_id=ACCOUNT, user_id=user, agent_id="main", session_id=self.session
        )
        asked = _message(common_pb2.MESSAGE_ROLE_USER, f"u{index}", turn.user)
        answered = _message(common_pb2.MESSAGE_ROLE_ASSISTANT, f"a{index}", turn.assistant)
        history = self.history.setdefault(user, [])
        assembly = assembly_pb2_grpc.AssemblyServiceStub(self.channel)
        capture = capture_pb2_grpc.CaptureServiceStub(self.channel)
        started = time.perf_counter()
        try:
            assembled = await assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=ident, messages=[*history, asked], token_budget=8000, model="gpt-4o",
                    prompt=turn.user,
                ),
                timeout=30,
            )  # fmt: skip
            tally.degraded += assembled.packet.degraded
            middle = time.perf_counter()
            await capture.AfterTurn(
                capture_pb2.AfterTurnRequest(
                    identity=ident,
                    messages=[*history, asked, answered],
                    pre_prompt_message_count=len(history),
                ),
                timeout=30,
            )
        except grpc.aio.AioRpcError as exc:
            tally.errors.append(f"{exc.code().name}: {(exc.details() or '')[:120]}")
            return
        done = time.perf_counter()
        history.extend([asked, answered])
        tally.assemble.append((middle - started) * 1000)
        tally.after_turn.append((done - middle) * 1000)
        tally.turns.append((done - started) * 1000)

    async def phase(self, users: Sequence[str], turns: int, concurrency: int, first: int) -> dict[str, Any]:
        tallies = {name: ShardTally() for name in sorted(set(self.shard_of[u] for u in users))}
        for user in users:
            tallies[self.shard_of[user]].tenants += 1
        gate = asyncio.Semaphore(concurrency)

        async def tenant(user: str) -> None:
            for index in range(first, first + turns):
                async with gate:
                    await self.turn(user, index, tallies[self.shard_of[user]])

        started = time.perf_counter()
        await asyncio.gather(*(tenant(u) for u in users))
        wall = time.perf_counter() - started
        turns = sum(len(t.turns) for t in tallies.values())
        return {
            "wall_s": round(wall, 2),
            "turns_per_s": round(turns / wall, 2),
            "shards": {n: t.summary(wall) for n, t in tallies.items()},
        }


@contextmanager
def engine(shards: ShardMap, log_dir: Path) -> Iterator[str]:
    """The engine (all three services in one process) over `shards`; yields its gRPC address."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env |= {
        "CONTEXT_ENGINE_OPENVIKING_SHARDS": ",".join(f"{s.name}={s.base_url}" for s in shards.shards),
        "OTEL_SDK_DISABLED": "true",
        "PYTHONUNBUFFERED": "1",
    }
    log_path = log_dir / f"engine-{port}.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.runtime.main", "--service", "all", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        give_up = time.monotonic() + 90
        while "listening on" not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > give_up:
                raise RuntimeError("engine did not start:\n" + log_path.read_text(errors="replace")[-2000:])
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


async def drive(
    address: str, shard_of: dict[str, str], session: str, args: argparse.Namespace
) -> dict[str, Any]:
    """One session per tenant of `shard_of`: a warm-up turn (accounts, sessions), then `--turns`."""
    async with grpc.aio.insecure_channel(address) as channel:
        driver = Driver(channel, shard_of, session)
        await driver.phase(list(shard_of), 1, args.concurrency, 0)
        return await driver.phase(list(shard_of), args.turns, args.concurrency, 1)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    layout = StackLayout.from_env()
    embeddings_venv = provision(layout, embedder_from_env().runtime)
    provision(layout, OPENVIKING_RUNTIME)
    port = free_port()
    embedder = ManagedProcess.spawn(
        embeddings_process(embedder_from_env(), embeddings_venv, port, work / "embeddings")
    )
    try:
        embedder.wait_ready(300)
        with running_shards(
            SHARDS, layout=layout, embeddings_url=embeddings_base_url(port), data_root=work
        ) as shards:
            return asyncio.run(_phases(shards, args, work))
    finally:
        embedder.stop()


async def _phases(shards: OpenVikingShards, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    users = [f"tenant{i:02d}" for i in range(args.tenants)]
    shard_of = {u: shards.shard_map.shard_for(Tenant(ACCOUNT, u)) for u in users}
    report: dict[str, Any] = {
        "tenants_per_shard": {n: sum(s == n for s in shard_of.values()) for n in SHARDS}
    }
    log(f"tenants per shard: {report['tenants_per_shard']}")
    first = shards.shard_map.shards[0]
    log(f"baseline: the same tenants on one server ({first.name} as the single baseUrl)")
    with engine(ShardMap.single(first.base_url), work) as address:
        report["one_server"] = await drive(address, dict.fromkeys(users, DEFAULT_SHARD), "single", args)
    with engine(shards.shard_map, work) as address:
        log(f"both shards up: {args.tenants} tenants x {args.turns} turns at {args.concurrency} callers")
        report["both_up"] = await drive(address, shard_of, "sharded", args)
        log(f"killing {KILLED} (SIGKILL)")
        os.killpg(shards.pids()[KILLED], signal.SIGKILL)
        report["one_killed"] = await drive(address, shard_of, "killed", args)
    return report


COLUMNS = ("tenants", "turns", "turns_per_s", "turn_p50_ms", "turn_p95_ms", "assemble_p50_ms",
           "after_turn_p50_ms", "errors", "degraded_assembles")  # fmt: skip


def table(report: dict[str, Any]) -> str:
    head = ("phase", "shard", "tenants", "turns", "turns/s", "turn p50", "turn p95",
            "Assemble p50", "AfterTurn p50", "errors", "degraded")  # fmt: skip
    rows: list[tuple[str, ...]] = [head]
    runs = [("1 server (baseUrl)", report["one_server"]), ("2 shards up", report["both_up"])]
    phases = [
        *((name, run["shards"]) for name, run in runs),
        (f"{KILLED} killed", report["one_killed"]["shards"]),
    ]
    for phase, per_shard in phases:
        for name, s in per_shard.items():
            rows.append((phase, name, *(str(s[key]) for key in COLUMNS)))
    for phase, result in runs:
        rows.append((phase, "all", "", "", str(result["turns_per_s"]), "", "", "", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.shards", description=__doc__)
    parser.add_argument("--tenants", type=int, default=16)
    parser.add_argument("--turns", type=int, default=8, help="measured turns per tenant and phase")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="shards-bench-") as tmp:
        report = run(args, Path(tmp))
    report["args"] = {k: str(v) for k, v in vars(args).items()}
    survivors = report["one_killed"]["shards"].get("ov-0", {})
    report["surviving_shard_errors"] = survivors.get("errors")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "shards.json").write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"wrote {args.out / 'shards.json'}")
    print(f"ov-0 errors with {KILLED} killed: {report['surviving_shard_errors']}")


if __name__ == "__main__":
    main()
