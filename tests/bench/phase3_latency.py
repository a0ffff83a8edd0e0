"""The Phase-3 bench's latency: Assemble with every source on next to one OpenViking `find`.

Per generated task, interleaved: Assemble of the task in a new session (every source on:
memories, exchanges, summaries, skills, tools, directory), the same task asked as a question
("Did I mention: ...", no skills: the intent's choice), and one `find` of the task (`limit` 10)
from the bench process. Assemble is timed twice per prompt, in the same round:

- *deployed*: the AssemblyService in its own process (`python -m shared.runtime.main --service
  assembly`), called over gRPC from the bench process, as a host calls it and as the `find` is
  called (the hard recall tier and the load bench time Assemble this way);
- *in process*: the bench's own AssemblyService (`runtime_assembly_spec`), whose gRPC client and
  server share the bench's event loop and core: each call also pays the client's side.

Both replicas are warmed first with every task (as in steady traffic: skill texts and the
user's learned size cached).

Then at a host's pace (`paced_latency`): a few tasks, each after a pause longer than every
per-tenant cache a replica keeps (skill texts, the user's learned size, user documents, the
directory: 30-60 s), Assemble through each replica and one `find`; back to back, a replica
never lets those caches age, and a host asking once a minute meets them aged on every call.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from shared.openviking import OpenVikingClient, Tenant
from tests.bench.phase3_data import SkillTask

Timed = Callable[[str, str], Awaitable[Any]]
"""Assemble `prompt` in session `session` (a replica's call)."""


async def assemble_latency(
    client: OpenVikingClient, tenant: Tenant, tasks: Sequence[SkillTask], replicas: Mapping[str, Timed]
) -> dict[str, float]:
    for name, assemble in replicas.items():
        for index, task in enumerate(tasks):
            await assemble(task.prompt, f"warm-{name}-{index}")
    tasked: dict[str, list[float]] = {name: [] for name in replicas}
    asked: dict[str, list[float]] = {name: [] for name in replicas}
    finds: list[float] = []
    for index, task in enumerate(tasks):
        for name, assemble in replicas.items():
            tasked[name].append(await _seconds(assemble(task.prompt, f"l-{name}-{index}")))
            asked[name].append(await _seconds(assemble(f"Did I mention: {task.prompt}", f"q-{name}-{index}")))
        finds.append(await _seconds(client.find(tenant, task.prompt, limit=10)))
    return {
        "find_p50_ms": _p50_ms(finds),
        **{f"{name}_assemble_p50_ms": _p50_ms(tasked[name]) for name in replicas},
        **{f"{name}_question_p50_ms": _p50_ms(asked[name]) for name in replicas},
    }


PACE_SECONDS = 65.0
"""The pause before each paced task: past every replica cache's age (the longest is 60 s)."""
GAP_SECONDS = 1.0
"""Between a paced task's calls (a replica's background reads land before the next call)."""
FIND = "find"


async def paced_latency(
    client: OpenVikingClient,
    tenant: Tenant,
    tasks: Sequence[SkillTask],
    replicas: Mapping[str, Timed],
    pace_seconds: float = PACE_SECONDS,
) -> dict[str, float]:
    """Each of `tasks` after `pace_seconds` of quiet: Assemble through each replica and a `find`,
    in an order turned by one per task (the first call after the quiet finds OpenViking idle)."""
    calls: dict[str, Callable[[SkillTask, str], Awaitable[Any]]] = {
        name: lambda task, session, assemble=assemble: assemble(task.prompt, session)
        for name, assemble in replicas.items()
    }
    calls[FIND] = lambda task, _: client.find(tenant, task.prompt, limit=10)
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for index, task in enumerate(tasks):
        await asyncio.sleep(pace_seconds)
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            seconds[name].append(await _seconds(calls[name](task, f"p-{name}-{index}")))
            await asyncio.sleep(GAP_SECONDS)
    return {
        "tasks": len(tasks),
        "pace_seconds": pace_seconds,
        "find_p50_ms": _p50_ms(seconds[FIND]),
        **{f"{name}_assemble_p50_ms": _p50_ms(seconds[name]) for name in replicas},
    }


def latency_markdown(latency: Mapping[str, float], labels: Mapping[str, str]) -> list[str]:
    """The latency rows, each replica's p50 and its ratio to the `find`'s."""
    find = latency["find_p50_ms"]
    lines = [
        f"Assemble p50 next to one `find` ({find:.1f} ms), same rounds:",
        "",
        "| AssemblyService | every source on (a task) | a question (no skill find) |",
        "|---|---|---|",
    ]
    for name, label in labels.items():
        task, question = latency[f"{name}_assemble_p50_ms"], latency[f"{name}_question_p50_ms"]
        lines.append(
            f"| {label} | {task:.1f} ms ({task / find:.2f}x) | {question:.1f} ms ({question / find:.2f}x) |"
        )
    return lines


def paced_markdown(paced: Mapping[str, float], labels: Mapping[str, str]) -> list[str]:
    """The paced rows: each replica's p50 of a task and its ratio to the same rounds' `find`."""
    find = paced["find_p50_ms"]
    lines = [
        f"At a host's pace ({paced['tasks']:.0f} tasks, {paced['pace_seconds']:.0f} s of quiet before each; "
        f"one `find` {find:.1f} ms):",
        "",
        "| AssemblyService | every source on (a task) |",
        "|---|---|",
    ]
    for name, label in labels.items():
        task = paced[f"{name}_assemble_p50_ms"]
        lines.append(f"| {label} | {task:.1f} ms ({task / find:.2f}x) |")
    return lines


async def _seconds(call: Awaitable[Any]) -> float:
    started = time.perf_counter()
    await call
    return time.perf_counter() - started


def _p50_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000
