"""Trace propagation and spans: gRPC server and client, OpenViking HTTP, background compaction.

One host turn is one trace: the host's `traceparent` arrives in gRPC metadata, the server
interceptor opens a SERVER span per RPC (`contextengine.v1.CaptureService/AfterTurn`), the
capture -> compaction channel carries it on (CLIENT span + metadata), and every OpenViking
HTTP call gets a CLIENT span plus `traceparent`/`tracestate` and `X-Request-ID` (the trace id)
headers. A background compaction finalised later runs in its own trace whose root span links
back to the turn that started it (`finalisation_span`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import grpc
from grpc import aio
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.runtime.interceptors import UnaryHandler, UnaryInterceptor
from shared.telemetry import attributes as attr
from shared.telemetry.metrics import record_openviking_call, record_rpc

TRACER_NAME = "contextengine"
FINALISE_SPAN_NAME = "contextengine.compaction.finalise"
"""Root span of a background compaction's finalisation; links to the originating turn."""
REQUEST_ID_HEADER = "X-Request-ID"
_UNTRACED_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
# Server statuses that mean the server failed (semantic conventions for gRPC SERVER spans).
_SERVER_ERROR_CODES = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
_ID_COLLECTIONS = frozenset({"sessions", "tasks", "accounts", "users"})
_W3C = TraceContextTextMapPropagator()


def engine_tracer(tracer_provider: TracerProvider | None = None) -> Tracer:
    """The engine's tracer (the process-wide provider unless one is given)."""
    return trace.get_tracer(TRACER_NAME, tracer_provider=tracer_provider)


def split_method(full_method: str) -> tuple[str, str]:
    """`/contextengine.v1.CaptureService/AfterTurn` -> (`contextengine.v1.CaptureService`, `AfterTurn`)."""
    service, _, method = full_method.lstrip("/").partition("/")
    return service, method


# --- gRPC server ---------------------------------------------------------------------------


class TracingServerInterceptor(UnaryInterceptor):
    """Continues the caller's trace (W3C metadata) with one SERVER span per unary RPC and
    records `contextengine.rpc.duration`. Put it before `ErrorMappingInterceptor` so it sees
    the mapped status. Health and reflection calls are not traced."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = engine_tracer(tracer_provider)

    def wrap(self, details: grpc.HandlerCallDetails, inner: UnaryHandler) -> UnaryHandler | None:
        if details.method.startswith(_UNTRACED_SERVICES):
            return None
        return self._traced(details.method, _metadata_carrier(details.invocation_metadata), inner)

    def _traced(self, full_method: str, carrier: Mapping[str, str], inner: UnaryHandler) -> UnaryHandler:
        service, method = split_method(full_method)
        tracer = self._tracer

        async def handler(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            parent = propagate.extract(carrier)
            started = time.perf_counter()
            code = grpc.StatusCode.OK
            with tracer.start_as_current_span(
                f"{service}/{method}",
                context=parent,
                kind=SpanKind.SERVER,
                attributes={attr.RPC_SYSTEM: "grpc", attr.RPC_SERVICE: service, attr.RPC_METHOD: method},
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    response = await inner(request, context)
                    code = _context_code(context) or grpc.StatusCode.OK
                    return response
                except aio.AbortError:
                    code = _context_code(context) or grpc.StatusCode.UNKNOWN
                    raise
                except BaseException as exc:
                    code = grpc.StatusCode.UNKNOWN
                    span.set_attribute(attr.ERROR_TYPE, type(exc).__name__)
                    raise
                finally:
                    span.set_attribute(attr.RPC_STATUS, code.value[0])
                    if code in _SERVER_ERROR_CODES:
                        span.set_status(Status(StatusCode.ERROR, code.name))
                    record_rpc(service, method, code.name, time.perf_counter() - started)

        return handler


def _metadata_carrier(metadata: Any) -> dict[str, str]:
    carrier: dict[str, str] = {}
    for key, value in metadata or ():
        if isinstance(value, str):
            carrier[key.lower()] = value
    return carrier


def _context_code(context: aio.ServicerContext[Any, Any]) -> grpc.StatusCode | None:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):  # some grpc versions report the raw integer
        return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    return None


# --- gRPC client (capture -> compaction) ---------------------------------------------------


class TracingClientInterceptor(aio.UnaryUnaryClientInterceptor):
    """Opens a CLIENT span per outgoing unary call and puts the trace context in its metadata."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = engine_tracer(tracer_provider)

    async def intercept_unary_unary(
        self,
        continuation: Callable[[aio.ClientCallDetails, Any], Awaitable[aio.UnaryUnaryCall[Any, Any]]],
        client_call_details: aio.ClientCallDetails,
        request: Any,
    ) -> aio.UnaryUnaryCall[Any, Any] | Any:
        raw_method = client_call_details.method
        full_method = raw_method.decode() if isinstance(raw_method, bytes) else str(raw_method)
        service, method = split_method(full_method)
        with self._tracer.start_as_current_span(
            f"{service}/{method}",
            kind=SpanKind.CLIENT,
            attributes={attr.RPC_SYSTEM: "grpc", attr.RPC_SERVICE: service, attr.RPC_METHOD: method},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            metadata = aio.Metadata(*(client_call_details.metadata or ()))
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            for key, value in carrier.items():
                metadata[key] = value
            details = aio.ClientCallDetails(
                client_call_details.method,
                client_call_details.timeout,
                metadata,
                client_call_details.credentials,
                client_call_details.wait_for_ready,
            )
            call = await continuation(details, request)
            code = await call.code()
            span.set_attribute(attr.RPC_STATUS, code.value[0])
            if code != grpc.StatusCode.OK:
                span.set_status(Status(StatusCode.ERROR, code.name))
            return call


def client_interceptors(tracer_provider: TracerProvider | None = None) -> tuple[aio.ClientInterceptor, ...]:
    """Interceptors for service-to-service channels (`ServiceContext.client_interceptors`)."""
    return (TracingClientInterceptor(tracer_provider),)


# --- OpenViking HTTP -----------------------------------------------------------------------


def trace_headers() -> dict[str, str]:
    """Header provider for `OpenVikingClient`: `traceparent` (+`tracestate`) and `X-Request-ID`
    (the current 32-hex trace id); empty outside a sampled or remote trace context."""
    headers: dict[str, str] = {}
    propagate.inject(headers)
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        headers[REQUEST_ID_HEADER] = trace.format_trace_id(span_context.trace_id)
    return headers


def openviking_route(path: str) -> str:
    """Low-cardinality route of an OpenViking path: ids after `sessions`, `tasks`, `accounts`
    and `users` become `{id}` (`/api/v1/sessions/s-1/messages` -> `/api/v1/sessions/{id}/messages`)."""
    segments = path.split("/")
    for index in range(1, len(segments)):
        if segments[index - 1] in _ID_COLLECTIONS and segments[index]:
            segments[index] = "{id}"
    return "/".join(segments)


class OpenVikingTracing:
    """HTTP middleware (`shared.openviking.http`): one CLIENT span per OpenViking HTTP attempt
    (`openviking POST /api/v1/search/find`), with method, route, server address and status;
    injects the span's `traceparent` and records `contextengine.openviking.*` metrics."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = engine_tracer(tracer_provider)

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        method = request.method
        route = openviking_route(request.path)
        started = time.perf_counter()
        status = "error"
        with self._tracer.start_as_current_span(
            f"openviking {method} {route}",
            kind=SpanKind.CLIENT,
            attributes={
                attr.HTTP_METHOD: method,
                attr.HTTP_ROUTE: route,
                attr.SERVER_ADDRESS: request.host,
                attr.SERVER_PORT: request.port,
                attr.PEER_SERVICE: "openviking",
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            request.headers.update(trace_headers())
            try:
                response = await send(request)
            except BaseException as exc:
                status = type(exc).__name__
                span.set_attribute(attr.ERROR_TYPE, status)
                span.set_status(Status(StatusCode.ERROR, status))
                raise
            else:
                status = str(response.status)
                span.set_attribute(attr.HTTP_STATUS, response.status)
                if response.status >= 400:
                    span.set_attribute(attr.ERROR_TYPE, status)
                    span.set_status(Status(StatusCode.ERROR))
                return response
            finally:
                record_openviking_call(method, route, status, time.perf_counter() - started)


# --- background compaction -----------------------------------------------------------------


def current_traceparent() -> str:
    """W3C `traceparent` of the current span (store it as `CompactCheckpoint.origin_traceparent`);
    "" when there is no valid span context."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent", "")


def link_from_traceparent(traceparent: str) -> Link | None:
    """A span link to the span named by `traceparent`, or None when it is empty or malformed."""
    if not traceparent:
        return None
    span_context = trace.get_current_span(_W3C.extract({"traceparent": traceparent})).get_span_context()
    return Link(span_context) if span_context.is_valid else None


@contextmanager
def finalisation_span(
    origin_traceparent: str,
    *,
    checkpoint_id: str = "",
    name: str = FINALISE_SPAN_NAME,
    tracer_provider: TracerProvider | None = None,
) -> Iterator[Span]:
    """Root span of a new trace for finishing a background compaction, linked to the turn that
    started it. OpenViking calls made inside it belong to it."""
    link = link_from_traceparent(origin_traceparent)
    with engine_tracer(tracer_provider).start_as_current_span(
        name, context=Context(), kind=SpanKind.INTERNAL, links=[link] if link else None
    ) as span:
        attr.set_checkpoint(checkpoint_id, span=span)
        yield span
