"""A real OTLP/gRPC receiver for tests: keeps every exported span and metric in memory."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    """`service.name` of the exporting resource."""
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    """"" for a root span."""
    links: tuple[tuple[str, str], ...]
    """(trace id, span id) of each link."""
    attributes: dict[str, object]


def _value(any_value: object) -> object:
    kind = any_value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(any_value, kind) if kind else None


def _service(resource_attributes: object) -> str:
    for kv in resource_attributes:  # type: ignore[attr-defined]
        if kv.key == "service.name":
            return str(_value(kv.value))
    return ""


@dataclass
class OtlpReceiver:
    endpoint: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: list[tuple[str, str]] = field(default_factory=list)
    """(service, metric name) of every exported data point batch."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def export_traces(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received: list[ReceivedSpan] = []
        for resource_spans in request.resource_spans:
            service = _service(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(_convert(service, span))
        with self._lock:
            self.spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()

    def export_metrics(
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        received: list[tuple[str, str]] = []
        for resource_metrics in request.resource_metrics:
            service = _service(resource_metrics.resource.attributes)
            for scope_metrics in resource_metrics.scope_metrics:
                received.extend((service, metric.name) for metric in scope_metrics.metrics)
        with self._lock:
            self.metrics.extend(received)
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def snapshot(self) -> tuple[list[ReceivedSpan], list[tuple[str, str]]]:
        with self._lock:
            return list(self.spans), list(self.metrics)


def _convert(service: str, span: trace_pb2.Span) -> ReceivedSpan:
    return ReceivedSpan(
        service=service,
        name=span.name,
        kind=span.kind,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in span.links),
        attributes={kv.key: _value(kv.value) for kv in span.attributes},
    )


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(  # noqa: N802
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        return self._receiver.export_traces(request, context)


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(  # noqa: N802
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        return self._receiver.export_metrics(request, context)


@contextmanager
def running_otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(receiver), server)  # type: ignore[no-untyped-call]
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(receiver), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.endpoint = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        server.stop(None)
