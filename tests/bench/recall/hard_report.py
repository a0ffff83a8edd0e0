"""The hard tier's report as Markdown (bench-results/recall-hard.md)."""

from __future__ import annotations

from typing import Any

from tests.bench.recall.hard_dataset import KINDS
from tests.bench.recall.scoring import BUDGETS, MODES

BASELINE_LABELS = {
    "bm25": "BM25 over raw dated turns",
    "dense": "MiniLM dense over raw dated turns",
    "rrf": "RRF(BM25 + MiniLM) over raw dated turns",
    "truncation": "newest raw turns (truncation)",
}


def _builders(report: dict[str, Any]) -> list[tuple[str, dict[Any, Any]]]:
    """(label, budget -> row) for the engine per mode, then each baseline."""
    rows = [(f"engine, {mode} session", report["engine"].get(mode, {})) for mode in MODES]
    return rows + [(BASELINE_LABELS[name], by_budget) for name, by_budget in report["baselines"].items()]


def _cell(rows: dict[Any, Any], budget: int, key: str, fmt: str = ".1f") -> str:
    row = rows.get(budget) or rows.get(str(budget))  # int keys, or str after a JSON round trip
    return "-" if row is None else format(row[key], fmt)


def markdown(report: dict[str, Any]) -> str:
    budgets = " | ".join(f"{b // 1000}k" for b in BUDGETS)
    workload = report["workload"]
    lines = [
        f"Hard tier: {workload['users']} conversations of {workload['sessions_per_user']} sessions "
        f"({', '.join(map(str, workload['messages_per_user']))} messages), questions "
        + ", ".join(f"{k} {n}" for k, n in workload["questions"].items())
        + f"; seed {workload['seed']}; speakers asked about by {workload.get('asked_by', 'full name')}.",
        "",
        "### Evidence recall (%) by budget",
        "",
        f"| context builder | {budgets} |",
        "|---|" + "---:|" * len(BUDGETS),
    ]
    builders = _builders(report)
    for label, rows in builders:
        lines.append(f"| {label} | " + " | ".join(_cell(rows, b, "recall") for b in BUDGETS) + " |")
    lines += ["", "### By question kind (%), 1k / 8k", "", "| context builder | " + " | ".join(KINDS) + " |"]
    lines.append("|---|" + "---:|" * len(KINDS))
    for label, rows in builders:
        cells = [
            f"{_cell(rows, BUDGETS[0], f'recall_{k}')} / {_cell(rows, BUDGETS[-1], f'recall_{k}')}"
            for k in KINDS
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "### Context tokens: median (max over budget)", "", f"| context builder | {budgets} |"]
    lines.append("|---|" + "---:|" * len(BUDGETS))
    for label, rows in builders:
        cells = [f"{_cell(rows, b, 'tokens', '.0f')} ({_cell(rows, b, 'max_over', '+.0f')})" for b in BUDGETS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    over = report["over_budget"]
    lines += ["", *(f"**OVER BUDGET: {o}**" for o in over)] if over else ["", "No context over its budget."]
    scale = report["scale"]
    if "error" in scale:
        lines += [
            "",
            f"**Latency at scale ({scale['stored_exchanges']} exchanges) failed: {scale['error']}**",
        ]
        return "\n".join(lines) + "\n"
    lines += [
        "",
        f"### Latency at scale ({scale['stored_exchanges']} stored exchanges, 1 caller)",
        "",
        "| what | p50 ms |",
        "|---|---:|",
        f"| Assemble (4k, new session), first call | {scale['assemble_p50_ms']} |",
        f"| Assemble (4k), the same session's next call | {scale['next_call_p50_ms']} |",
        f"| OpenViking find (same query, target, limit) | {scale['find_p50_ms']} |",
        f"| ratio, first / next call | {scale['assemble_over_find']}x / {scale['next_call_over_find']}x |",
        "",
        f"Replay {workload['replay_seconds']} s (AfterTurn p50 {workload['after_turn_p50_ms']} ms); "
        f"storing the scale user's exchanges {scale['store_seconds']} s.",
    ]
    return "\n".join(lines) + "\n"
