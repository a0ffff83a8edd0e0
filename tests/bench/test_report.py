"""Report helpers of the benchmark: early/late growth stats, span routes, shortened sessions."""

from __future__ import annotations

from tests.bench.phases.assembly import memory_texts
from tests.bench.phases.growth import early_late, shortened
from tests.bench.traces import SERVER_KIND, SpanRecord, client_spans
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
