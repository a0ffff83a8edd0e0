"""Report helpers of the benchmark: early/late growth stats, span routes, shortened sessions."""

from __future__ import annotations

from typing import Any

from tests.bench.phases.assembly import memory_texts
from tests.bench.phases.growth import early_late, shortened
from tests.bench.report.spans import calls_per_turn
from tests.bench.report.tables import calls_table
from tests.bench.report.targets import issue_targets, targets_table
from tests.bench.traces import SERVER_KIND, SpanRecord, client_spans, split_rpcs
from tests.bench.workload import generate


def test_early_late_splits_first_and_last_hundred() -> None:
    points = [(turn, float(turn)) for turn in range(1, 1001)]
    got = early_late(points)
    assert got["early"]["turns"] == "1-100"
    assert got["late"]["turns"] == "901-1000"
    assert got["early"]["count"] == got["late"]["count"] == 100
    assert got["early"]["p50_ms"] == 50.5
    assert got["late"]["p50_ms"] == 950.5
    assert early_late([]) == {}


def test_shortened_cuts_only_tool_results() -> None:
    session = generate(1, 30, 5).sessions[0]
    short = shortened(session, 100)
    assert [t.user for t in short.turns] == [t.user for t in session.turns]
    assert all(len(t.tool.output) <= 100 for t in short.turns if t.tool)
    assert shortened(session, 0) is session


def test_memory_texts_are_distinct() -> None:
    texts = memory_texts(200, 7)
    assert len(set(texts)) == 200
    assert texts == memory_texts(200, 7)


def test_client_spans_by_route_inside_the_window() -> None:
    spans = [
        SpanRecord(b"a", "/contextengine.v1.CompactionService/Compact", SERVER_KIND, 100, 900),
        SpanRecord(b"a", "openviking POST /api/v1/sessions/{id}/commit", 3, 200, 500),
        SpanRecord(b"a", "openviking GET /api/v1/tasks/{id}", 3, 600, 700),
        SpanRecord(b"b", "/contextengine.v1.CompactionService/Compact", SERVER_KIND, 5000, 6000),
        SpanRecord(b"b", "openviking POST /api/v1/sessions/{id}/commit", 3, 5100, 5200),
    ]
    rpcs, routes = client_spans(spans, "Compact", 0, 1000)
    assert rpcs == 1
    assert routes == {"POST /api/v1/sessions/{id}/commit": [0.0003], "GET /api/v1/tasks/{id}": [0.0001]}


def test_split_rpcs_times_the_engine_before_and_after_openviking() -> None:
    ms = 1_000_000
    spans = [
        SpanRecord(b"a", "/contextengine.v1.AssemblyService/Assemble", SERVER_KIND, 0, 40 * ms),
        SpanRecord(b"a", "openviking POST /api/v1/search/find", 3, 3 * ms, 20 * ms),
        SpanRecord(b"a", "openviking POST /api/v1/search/grep", 3, 4 * ms, 30 * ms),
        SpanRecord(b"b", "/contextengine.v1.AssemblyService/Assemble", SERVER_KIND, 100 * ms, 105 * ms),
    ]
    got = {s.start_ns: s for s in split_rpcs(spans, ("Assemble",))}
    assert (got[0].openviking_ms, got[0].before_ms, got[0].after_ms) == (27.0, 3.0, 10.0)
    assert got[0].total_ms - got[0].openviking_ms == got[0].before_ms + got[0].after_ms
    assert (got[100 * ms].before_ms, got[100 * ms].after_ms, got[100 * ms].openviking_calls) == (5.0, 0.0, 0)


def _phase(op: str, p50_at_1: float, turns_per_s_at_8: float) -> list[dict[str, Any]]:
    """A traffic phase's rows as the report holds them: `op`'s p50 at 1 caller, turns/s at 8."""
    return [
        {"concurrency": 1, "ops": {op: {"p50_ms": p50_at_1}}},
        {"concurrency": 8, "turns_per_s": turns_per_s_at_8},
    ]


def test_targets_compare_with_the_same_run_and_say_what_is_not_measured() -> None:
    def assemble_vs_find(level: int, assemble: float, find: float) -> dict[str, Any]:
        ops = {"Assemble": {"p50_ms": assemble}, "ov.find(same query)": {"p50_ms": find}}
        return {"concurrency": level, "ops": ops}

    report = {
        "assembly": {"levels": [assemble_vs_find(1, 65.0, 50.0), assemble_vs_find(8, 400.0, 200.0)]},
        "concurrency": _phase("AfterTurn", 30.0, 8.0),
        "openviking_raw": _phase("ov.add_messages_batch", 20.0, 10.0),
        "wrapped": [{"phase": "assembly@1", "method": "Assemble", "engine_own_p50_ms": 12.0}],
    }
    targets = issue_targets(report)
    assert [(t.ratio, t.met) for t in targets] == [
        (1.3, True),
        (2.0, False),
        (1.5, True),
        (None, None),  # CommitTurn: not in this report
        (1.2, False),  # 12 ms against the 10 ms limit
        (0.8, True),
    ]
    assert (targets[0].measured, targets[0].baseline) == (65.0, 50.0)
    assert "not measured" in "\n".join(targets_table(report))


def test_the_indexed_baseline_is_context_beside_the_targets_not_one_of_them() -> None:
    report = {
        "concurrency": _phase("AfterTurn", 30.0, 6.0),
        "openviking_raw": _phase("ov.add_messages_batch", 8.0, 15.0),
        "openviking_raw_indexed": _phase("ov.add_messages_batch", 12.0, 7.5),
    }
    targets = issue_targets(report)
    assert (targets[-1].ratio, targets[-1].met) == (0.4, False)  # the issue's baselines stay
    assert (targets[2].ratio, targets[2].met) == (3.75, False)
    context = [line for line in targets_table(report) if line.startswith("| not a target")]
    assert len(context) == 2
    assert "AfterTurn" in context[0] and "| 30.0 | 12.0 | 2.50 |" in context[0]
    assert "| 6.0 | 7.5 | 0.80 |" in context[1]
    without = {k: v for k, v in report.items() if k != "openviking_raw_indexed"}
    assert not any(line.startswith("| not a target") for line in targets_table(without))


def test_calls_per_turn_counts_every_openviking_span_in_the_window_by_route() -> None:
    spans = [
        SpanRecord(b"a", "/contextengine.v1.CaptureService/AfterTurn", SERVER_KIND, 100, 300),
        SpanRecord(b"a", "openviking POST /api/v1/content/batch-write", 3, 110, 200),
        SpanRecord(
            b"b", "openviking POST /api/v1/sessions/{id}/messages/batch", 3, 400, 500
        ),  # after the answer
        SpanRecord(b"c", "openviking POST /api/v1/content/batch-write", 3, 600, 700),
        SpanRecord(b"d", "openviking POST /api/v1/search/find", 3, 5000, 5100),  # another window
    ]
    got = calls_per_turn(spans, [("concurrency 1", 0, 1000, 2), ("none", 0, 1000, 0)])
    assert got == {
        "concurrency 1": {
            "POST /api/v1/content/batch-write": 1.0,
            "POST /api/v1/sessions/{id}/messages/batch": 0.5,
            "all": 1.5,
        }
    }
    table = calls_table({"openviking_calls_per_turn": got})
    assert "| POST /api/v1/content/batch-write | 1.0 |" in table
    assert table[-1] == "| all | 1.5 |"
