"""The services' spans by phase: engine-own vs OpenViking time, and OpenViking calls by route."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.bench.common import percentile, rounded, stats
from tests.bench.traces import SpanRecord, client_spans, split_rpcs

WRAPPED_METHODS = ("AfterTurn", "Assemble", "Compact", "ExpandMemory")


def route_summary(
    spans: list[SpanRecord], windows: list[tuple[str, str, int, int]]
) -> dict[str, dict[str, Any]]:
    """Per labelled window: the OpenViking calls inside its RPCs, by route (calls per RPC, p50/p99)."""
    out: dict[str, dict[str, Any]] = {}
    for label, method, start, end in windows:
        rpcs, routes = client_spans(spans, method, start, end)
        out[label] = {
            "rpcs": rpcs,
            "routes": {
                route: {
                    "per_rpc": rounded(len(values) / rpcs, 2) if rpcs else None,
                    **{k: v for k, v in stats(values).items() if k != "errors"},
                }
                for route, values in sorted(routes.items(), key=lambda kv: -sum(kv[1]))
            },
        }
    return out


def wrapped_summary(spans: list[SpanRecord], windows: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """Per phase and RPC: server-side time split into OpenViking calls and the engine's own time."""
    splits = split_rpcs(spans, WRAPPED_METHODS)
    out: list[dict[str, Any]] = []
    for phase, start, end in windows:
        for method in WRAPPED_METHODS:
            chosen = [s for s in splits if s.method == method and start <= s.start_ns <= end]
            if not chosen:
                continue
            out.append(
                {
                    "phase": phase,
                    "method": method,
                    "count": len(chosen),
                    "server_p50_ms": rounded(percentile([s.total_ms for s in chosen], 50)),
                    "server_p95_ms": rounded(percentile([s.total_ms for s in chosen], 95)),
                    "openviking_p50_ms": rounded(percentile([s.openviking_ms for s in chosen], 50)),
                    "openviking_p95_ms": rounded(percentile([s.openviking_ms for s in chosen], 95)),
                    "engine_own_p50_ms": rounded(
                        percentile([s.total_ms - s.openviking_ms for s in chosen], 50)
                    ),
                    "engine_own_p95_ms": rounded(
                        percentile([s.total_ms - s.openviking_ms for s in chosen], 95)
                    ),
                    "before_openviking_p50_ms": rounded(percentile([s.before_ms for s in chosen], 50)),
                    "after_openviking_p50_ms": rounded(percentile([s.after_ms for s in chosen], 50)),
                    "openviking_calls_mean": rounded(
                        sum(s.openviking_calls for s in chosen) / len(chosen), 1
                    ),
                }
            )
    return out


def calls_per_turn(
    spans: list[SpanRecord], windows: list[tuple[str, int, int, int]]
) -> dict[str, dict[str, float]]:
    """Per traffic window: every OpenViking call the services started in it (inside an RPC or
    after its answer), by route, per turn; `all` is their sum."""
    out: dict[str, dict[str, float]] = {}
    for label, start, end, turns in windows:
        if not turns:
            continue
        routes = Counter(
            s.name.removeprefix("openviking ")
            for s in spans
            if s.name.startswith("openviking ") and start <= s.start_ns <= end
        )
        per_turn = {route: rounded(n / turns, 2) for route, n in routes.most_common()}
        out[label] = {**per_turn, "all": rounded(sum(routes.values()) / turns, 2)}
    return out
