"""The embedder bench: the ONNX server (the stack's default) beside the PyTorch one, in one run.

`python -m tests.bench.embedders [--users 3] [--rounds 3]` provisions both embedding runtimes,
starts both servers on free ports and writes `bench-results/embedders.{json,md}`:

- throughput on the hard recall tier's turn texts (`tests.bench.recall.hard_dataset`), three
  shapes: one text per request from one caller (the turn index writes one exchange per call), one
  text per request from 4 callers, and batches of 32; rounds alternate the servers, the median
  round is reported;
- quality: the hard tier's dense (MiniLM) and RRF baselines computed with each server's vectors
  (the same questions, budgets and counting as `make bench-recall`), and the cosine between the
  two servers' vectors of the same texts;
- install: each venv's size, whether PyTorch is in it, and its last install's duration (as
  recorded by `shared.localstack.runtimes`; a pip cache makes a rebuild faster than a first one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from shared.localstack.components import embeddings_base_url, embeddings_process
from shared.localstack.embedders import Embedder
from shared.localstack.layout import StackLayout
from shared.localstack.processes import ManagedProcess, free_port
from shared.localstack.runtimes import install_seconds, provision, venv_path
from shared.tokens import TokenCounter
from tests.bench.recall.dated_baselines import dated_turns, embed
from tests.bench.recall.hard_dataset import generate_hard
from tests.bench.recall.hard_run import baseline_rows

SEED = 29
BATCH = 32
CALLERS = 4
DENSE_BASELINES = ("dense", "rrf")
Row = dict[str, Any]


@dataclass(frozen=True)
class Server:
    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """User + system CPU of the server process so far (all its threads)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def running(embedder: Embedder, layout: StackLayout, log_dir: Path) -> Iterator[Server]:
    venv = provision(layout, embedder.runtime)
    port = free_port()
    process = ManagedProcess.spawn(embeddings_process(embedder, venv, port, log_dir / embedder.value))
    try:
        process.wait_ready(300.0)
        yield Server(embeddings_base_url(port), process.pid)
    finally:
        process.stop()


async def _rate(server: Server, texts: Sequence[str], callers: int, batch: int) -> tuple[float, float]:
    """Texts embedded per second by `callers` concurrent clients sending `batch` texts a request,
    and the server's CPU milliseconds per text (steadier than the rate on a shared machine)."""
    cpu = server.cpu_seconds()
    rate = await _per_second(server.url, texts, callers, batch)
    return rate, (server.cpu_seconds() - cpu) * 1000 / len(texts)


async def _per_second(url: str, texts: Sequence[str], callers: int, batch: int) -> float:
    chunks = [list(texts[i : i + batch]) for i in range(0, len(texts), batch)]
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    for chunk in chunks:
        queue.put_nowait(chunk)
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:

        async def caller() -> None:
            while not queue.empty():
                response = await http.post("/embeddings", json={"input": queue.get_nowait()})
                response.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        return len(texts) / (time.perf_counter() - start)


SHAPES = {"1 caller, 1 text a request": (1, 1), f"{CALLERS} callers, 1 text a request": (CALLERS, 1)}
SHAPES[f"1 caller, {BATCH} texts a request"] = (1, BATCH)


async def throughput(servers: dict[Embedder, Server], texts: Sequence[str], rounds: int) -> dict[str, Row]:
    rates: dict[tuple[str, Embedder], list[float]] = {}
    cpu: dict[tuple[str, Embedder], list[float]] = {}
    for server in servers.values():
        await _per_second(server.url, texts[:16], 1, 4)  # warm-up
    for _ in range(rounds):
        for shape, (callers, batch) in SHAPES.items():
            for embedder, server in servers.items():
                rate, cpu_ms = await _rate(server, texts, callers, batch)
                rates.setdefault((shape, embedder), []).append(rate)
                cpu.setdefault((shape, embedder), []).append(cpu_ms)
    return {
        shape: {
            **{e.value: statistics.median(rates[(shape, e)]) for e in servers},
            **{f"{e.value}_cpu_ms": statistics.median(cpu[(shape, e)]) for e in servers},
        }
        for shape in SHAPES
    }


async def agreement(servers: dict[Embedder, Server], texts: Sequence[str]) -> Row:
    """Cosine between the two servers' vectors of the same texts."""
    vectors = []
    for server in servers.values():
        async with httpx.AsyncClient(base_url=server.url, timeout=300) as http:
            vectors.append(await embed(http, texts))
    cosines = (vectors[0] * vectors[1]).sum(axis=1)
    return {"min": float(cosines.min()), "mean": float(cosines.mean()), "texts": len(texts)}


def install_rows(layout: StackLayout) -> dict[str, Row]:
    rows = {}
    for embedder in Embedder:
        venv = venv_path(layout, embedder.runtime)
        size = subprocess.run(["du", "-sb", str(venv)], capture_output=True, text=True, check=True)
        rows[embedder.value] = {
            "venv_mb": int(size.stdout.split()[0]) / 1e6,
            "pytorch": any(venv.glob("lib/python3*/site-packages/torch")),
            "install_s": install_seconds(layout, embedder.runtime),
        }
    return rows


async def run(args: argparse.Namespace) -> Row:
    layout = StackLayout.from_env()
    counter = TokenCounter("o200k_base")
    conversations = generate_hard(seed=SEED, users=args.users)
    texts = [turn.line for c in conversations for turn in dated_turns(c, counter)][: args.texts]
    with ExitStack() as stack:
        servers = {e: stack.enter_context(running(e, layout, args.out / "logs")) for e in Embedder}
        report: Row = {"texts": len(texts), "rounds": args.rounds}
        report["throughput"] = await throughput(servers, texts, args.rounds)
        report["agreement"] = await agreement(servers, texts[:512])
        quality = {}
        for embedder, server in servers.items():
            rows = await baseline_rows(conversations, counter, server.url)
            quality[embedder.value] = {name: rows[name] for name in DENSE_BASELINES}
        report["quality"] = quality
    report["install"] = install_rows(layout)
    return report


def markdown(report: Row) -> str:
    onnx, torch = Embedder.ONNX.value, Embedder.TORCH.value
    lines = [
        f"Texts: {report['texts']} turn lines of the hard tier; median of {report['rounds']} rounds.",
        "",
    ]
    lines += [
        "| shape | texts/s ONNX | PyTorch | ONNX / PyTorch | CPU ms/text ONNX | PyTorch | PyTorch / ONNX |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for shape, row in report["throughput"].items():
        rate = f"{row[onnx]:.1f} | {row[torch]:.1f} | {row[onnx] / row[torch]:.2f}x"
        cpu_ms = row[f"{onnx}_cpu_ms"], row[f"{torch}_cpu_ms"]
        lines.append(
            f"| {shape} | {rate} | {cpu_ms[0]:.1f} | {cpu_ms[1]:.1f} | {cpu_ms[1] / cpu_ms[0]:.2f}x |"
        )
    agreement = report["agreement"]
    lines += ["", f"Cosine ONNX vs PyTorch on {agreement['texts']} texts: min {agreement['min']:.4f}, "]
    lines[-1] += f"mean {agreement['mean']:.4f}."
    lines += ["", "| evidence recall, hard tier | 1k | 2k | 4k | 8k |", "|---|---:|---:|---:|---:|"]
    for name in DENSE_BASELINES:
        for embedder in (onnx, torch):
            row = report["quality"][embedder][name]
            cells = " | ".join(f"{row[b]['recall']:.1f}" for b in sorted(row, key=int))
            lines.append(f"| {name}, {embedder} | {cells} |")
    lines += ["", "| install | venv MB | PyTorch in it | last install s |", "|---|---:|:---:|---:|"]
    for embedder, row in report["install"].items():
        seconds = "—" if row["install_s"] is None else f"{row['install_s']:.0f}"
        lines.append(
            f"| {embedder} | {row['venv_mb']:.0f} | {'yes' if row['pytorch'] else 'no'} | {seconds} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=3, help="hard-tier conversations (quality)")
    parser.add_argument("--texts", type=int, default=600, help="texts per throughput round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(run(args))
    (args.out / "embedders.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    text = markdown(report)
    (args.out / "embedders.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
