"""Engine time vs OpenViking time from the engine's own spans (the "wrapping" measurement).

The services export traces over OTLP/gRPC to `SpanSink`; every bench RPC is the root of its own
trace (the bench client does not trace), so each server span's trace holds exactly the
OpenViking HTTP client spans (`openviking <METHOD> <route>`) made on its behalf, including those
of nested engine calls (capture -> compaction). For each server span: OpenViking time = the union
of those spans' intervals clipped to the server span; engine time = the rest.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

SERVER_KIND = 2  # opentelemetry.proto.trace.v1.Span.SPAN_KIND_SERVER


@dataclass(frozen=True)
class SpanRecord:
    trace_id: bytes
    name: str
    kind: int
    start_ns: int
    end_ns: int


@dataclass
class SpanSink(trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer):
    spans: list[SpanRecord] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: Any = None
    endpoint: str = ""

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
        if isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest):
            return metrics_service_pb2.ExportMetricsServiceResponse()
        received = [
            SpanRecord(
                span.trace_id, span.name, span.kind, span.start_time_unix_nano, span.end_time_unix_nano
            )
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
        with self.lock:
            self.spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()

    def start(self) -> SpanSink:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)  # type: ignore[no-untyped-call]
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self.server)  # type: ignore[no-untyped-call]
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace=1)

    def snapshot(self) -> list[SpanRecord]:
        with self.lock:
            return list(self.spans)


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total = 0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


@dataclass(frozen=True)
class RpcSplit:
    method: str
    start_ns: int
    total_ms: float
    openviking_ms: float
    openviking_calls: int
    before_ms: float
    """From the RPC's start to its first OpenViking call (the whole RPC when it made none)."""
    after_ms: float
    """From its last OpenViking call's end to the RPC's end (0 when it made none)."""


def split_rpcs(spans: list[SpanRecord], methods: tuple[str, ...]) -> list[RpcSplit]:
    """One `RpcSplit` per root server span whose name ends with one of `methods` ("/Assemble")."""
    by_trace: dict[bytes, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    out: list[RpcSplit] = []
    for trace in by_trace.values():
        servers = [s for s in trace if s.kind == SERVER_KIND]
        if not servers:
            continue
        root = min(servers, key=lambda s: s.start_ns)
        method = root.name.rsplit("/", 1)[-1]
        if method not in methods:
            continue
        calls = [
            (max(s.start_ns, root.start_ns), min(s.end_ns, root.end_ns))
            for s in trace
            if s.name.startswith("openviking ") and s.end_ns > root.start_ns and s.start_ns < root.end_ns
        ]
        out.append(
            RpcSplit(
                method=method,
                start_ns=root.start_ns,
                total_ms=(root.end_ns - root.start_ns) / 1e6,
                openviking_ms=_union_ns(calls) / 1e6,
                openviking_calls=len(calls),
                before_ms=(min((c[0] for c in calls), default=root.end_ns) - root.start_ns) / 1e6,
                after_ms=(root.end_ns - max((c[1] for c in calls), default=root.end_ns)) / 1e6,
            )
        )
    return out


def client_spans(
    spans: list[SpanRecord], method: str, start_ns: int, end_ns: int
) -> tuple[int, dict[str, list[float]]]:
    """OpenViking HTTP client spans inside the traces of `method` RPCs that started in the window.

    Returns (number of such RPCs, {route ("POST /api/v1/search/find"): [span ms, ...]}).
    """
    by_trace: dict[bytes, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    rpcs = 0
    routes: dict[str, list[float]] = defaultdict(list)
    for trace in by_trace.values():
        servers = [s for s in trace if s.kind == SERVER_KIND]
        if not servers:
            continue
        root = min(servers, key=lambda s: s.start_ns)
        if root.name.rsplit("/", 1)[-1] != method or not start_ns <= root.start_ns <= end_ns:
            continue
        rpcs += 1
        for s in trace:
            if s.name.startswith("openviking "):
                routes[s.name.removeprefix("openviking ")].append((s.end_ns - s.start_ns) / 1e6)
    return rpcs, dict(routes)
