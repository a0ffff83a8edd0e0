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
    """The same-run baseline a relative goal compares with (None: not measured, or an absolute goal)."""
    limit: float
    """Most (or, with `at_least`, least) the ratio - or the measured value, for absolute goals -
    may be."""
    at_least: bool = False
    relative: bool = True
    """The limit bounds measured / baseline (False: it bounds the measured ms themselves)."""
    elsewhere: str = ""
    """The `make bench` step that measures it when this run does not (with its own baseline)."""

    @property
    def ratio(self) -> float | None:
        divisor = self.baseline if self.relative else self.limit
        if self.measured is None or not divisor:
            return None
        return self.measured / divisor

    @property
    def met(self) -> bool | None:
        value = self.ratio if self.relative else self.measured
        if value is None or self.ratio is None:
            return None
        return value >= self.limit if self.at_least else value <= self.limit

    @property
    def limit_text(self) -> str:
        return f"{'>=' if self.at_least else '<='} {self.limit:g}" + ("x" if self.relative else " ms")


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
                elsewhere="python -m tests.bench.capture_path",
            )
        )
    out.append(
        Target(
            f"engine's own p50 per Assemble, 500-turn transcript, 1 caller <= {ENGINE_OWN_LIMIT_MS:g} ms",
            _engine_own(report, "assembly@1"),
            None,
            ENGINE_OWN_LIMIT_MS,
            relative=False,
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


def _context_row(what: str, measured: float | None, indexed: float | None) -> list[str]:
    """A row beside the targets, not one of them: `what` against OpenViking alone doing the same
    writes (the indexed baseline), when the run measured both."""
    if measured is None or not indexed:
        return []
    return [
        f"| not a target, for context: {what} that also writes each exchange to the turn index "
        f"| {fmt(measured)} | {fmt(indexed)} | {measured / indexed:.2f} | — | — |"
    ]


def targets_table(report: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "| issue-16 targets | measured | baseline (same run) | ratio | limit | met |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for t in issue_targets(report):
        measured = fmt(t.measured) if t.measured is not None else "not measured"
        if t.measured is None and t.elsewhere:
            measured = f"not measured here: `{t.elsewhere}` (`make bench`) measures it beside its own append"
        baseline = "—" if t.baseline is None else fmt(t.baseline)
        ratio = "—" if t.ratio is None else f"{t.ratio:.2f}"
        lines.append(f"| {t.goal} | {measured} | {baseline} | {ratio} | {t.limit_text} | {_mark(t.met)} |")
    lines.append(
        "| 2 OpenViking shards: tenants split, per-shard numbers, one shard killed -> 0 errors on the "
        "other | measured by `python -m tests.bench.shards` (`make bench`, after this one) | — | — | — | — |"
    )
    replay1 = _by_concurrency(report.get("concurrency", []), 1).get("ops", {})
    indexed1 = _by_concurrency(report.get("openviking_raw_indexed", []), 1).get("ops", {})
    lines += _context_row(
        "AfterTurn p50 at 1 caller against the append of OpenViking alone",
        _p50(replay1, "AfterTurn"),
        _p50(indexed1, "ov.add_messages_batch"),
    )
    lines += _context_row(
        "stack turns/s at 8 callers against OpenViking alone",
        _by_concurrency(report.get("concurrency", []), 8).get("turns_per_s"),
        _by_concurrency(report.get("openviking_raw_indexed", []), 8).get("turns_per_s"),
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
        f"{fmt(profile['cpu_ms_p95'])} ms per call (without the profiler), of which the garbage "
        f"collector {fmt(profile.get('gc_ms_per_call'))} ms (collections by generation: "
        f"{profile.get('gc_collections')}); top functions by own time "
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
