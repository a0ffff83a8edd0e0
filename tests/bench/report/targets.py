"""The performance issue's "Done when" lines, each with what this run measured beside its
baseline from the same run, and where Assemble's own time goes (cProfile)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tests.bench.common import fmt, rounded

ENGINE_OWN_LIMIT_MS = 10.0


@dataclass(frozen=True)
class Target:
    goal: str
    measured: float | None
    baseline: float | None
    """The same-run baseline the goal compares with (None: an absolute goal)."""
    limit: float
    """Most (or, with `at_least`, least) the ratio - or the measured value, for absolute goals -
    may be."""
    at_least: bool = False

    @property
    def ratio(self) -> float | None:
        if self.measured is None:
            return None
        if self.baseline is None:
            return self.measured / self.limit if self.limit else None
        return self.measured / self.baseline if self.baseline else None

    @property
    def met(self) -> bool | None:
        if self.measured is None or (self.baseline is not None and not self.baseline):
            return None
        value = self.measured if self.baseline is None else self.ratio
        assert value is not None
        return value >= self.limit if self.at_least else value <= self.limit


def _p50(ops: dict[str, Any], op: str) -> float | None:
    value = ops.get(op, {}).get("p50_ms")
    return float(value) if value is not None else None


def _by_concurrency(rows: list[dict[str, Any]], level: int) -> dict[str, Any]:
    return next((r for r in rows if r.get("concurrency") == level), {})


def _engine_own(report: dict[str, Any], phase: str) -> float | None:
    for w in report.get("wrapped", []):
        if w["phase"] == phase and w["method"] == "Assemble":
            return w.get("engine_own_p50_ms")
    return None


def issue_targets(report: dict[str, Any]) -> list[Target]:
    """Every Done-when line; what this run does not measure has no value (shown as not measured)."""
    levels = report.get("assembly", {}).get("levels", [])
    replay, raw = report.get("concurrency", []), report.get("openviking_raw", [])
    out: list[Target] = []
    for level, limit in ((1, 1.3), (8, 1.5)):
        ops = _by_concurrency(levels, level).get("ops", {})
        out.append(
            Target(
                f"Assemble p50 <= {limit}x one OpenViking find of the same query, {level} caller(s)",
                _p50(ops, "Assemble"),
                _p50(ops, "ov.find(same query)"),
                limit,
            )
        )
    replay1, raw1 = _by_concurrency(replay, 1).get("ops", {}), _by_concurrency(raw, 1).get("ops", {})
    for op in ("AfterTurn", "CommitTurn"):
        out.append(
            Target(
                f"{op} p50 <= 1.5x OpenViking batch append of the same messages, 1 caller",
                _p50(replay1, op),
                _p50(raw1, "ov.add_messages_batch"),
                1.5,
            )
        )
    out.append(
        Target(
            f"engine's own p50 per Assemble, 500-turn transcript, 1 caller <= {ENGINE_OWN_LIMIT_MS:g} ms",
            _engine_own(report, "assembly@1"),
            None,
            ENGINE_OWN_LIMIT_MS,
        )
    )
    out.append(
        Target(
            "stack turns/s at 8 callers >= 0.8x OpenViking-only",
            _by_concurrency(replay, 8).get("turns_per_s"),
            _by_concurrency(raw, 8).get("turns_per_s"),
            0.8,
            at_least=True,
        )
    )
    return out


def _mark(met: bool | None) -> str:
    return "—" if met is None else ("✔" if met else "✘")


def targets_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "| issue-16 targets | measured | baseline (same run) | ratio | limit | met |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for t in issue_targets(report):
        measured = "not measured" if t.measured is None else fmt(t.measured)
        baseline = "—" if t.baseline is None else fmt(t.baseline)
        ratio = "—" if t.ratio is None else f"{t.ratio:.2f}"
        limit = f"{'>=' if t.at_least else '<='} {t.limit:g}" + ("x" if t.baseline is not None else " ms")
        lines.append(f"| {t.goal} | {measured} | {baseline} | {ratio} | {limit} | {_mark(t.met)} |")
    lines.append(
        "| 2 OpenViking shards: tenants split, per-shard numbers, one shard killed -> 0 errors on the "
        "other | measured by `python -m tests.bench.shards` (`make bench`, after this one) | — | — | — | — |"
    )
    return lines


def targets_json(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**asdict(t), "ratio": rounded(t.ratio, 3) if t.ratio is not None else None, "met": t.met}
        for t in issue_targets(report)
    ]


def profile_table(report: dict[str, Any]) -> list[str]:
    profile = report.get("assembly", {}).get("profile")
    if not profile:
        return []
    lines = [
        "",
        f"Assemble in process over the {profile['transcript_messages']}-message transcript "
        f"({profile['calls']} calls): CPU p50 {fmt(profile['cpu_ms_p50'])} ms, p95 "
        f"{fmt(profile['cpu_ms_p95'])} ms per call (without the profiler); top functions by own time "
        "under cProfile (`bench-results/assemble-profile.txt`):",
        "",
        "| function | calls/Assemble | own ms/Assemble | cumulative ms/Assemble |",
        "|---|---:|---:|---:|",
    ]
    for row in profile["top"]:
        name = row["function"].replace("|", "\\|")
        lines.append(
            f"| `{name}` | {fmt(row['calls_per_assemble'])} | {row['own_ms_per_assemble']:.2f} "
            f"| {row['cumulative_ms_per_assemble']:.2f} |"
        )
    return lines
