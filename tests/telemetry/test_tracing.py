from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc import aio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from shared.errors import BackendUnavailable, NotFound
from shared.openviking.http import HttpRequest, HttpResponse, HttpSession, Send, encode_json
from shared.openviking.settings import PoolLimits
from shared.runtime.interceptors import ErrorMappingInterceptor
from shared.telemetry import (
    FINALISE_SPAN_NAME,
    OpenVikingTracing,
    TracingClientInterceptor,
    TracingServerInterceptor,
    current_traceparent,
    finalisation_span,
    link_from_traceparent,
    openviking_route,
    trace_headers,
)
from shared.telemetry import attributes as attr
from tests.support.lookalike_openviking import LookalikeOpenViking

Spans = tuple[TracerProvider, InMemorySpanExporter]
TRACEPARENT = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
HOST_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_TRACEPARENT = f"00-{HOST_TRACE_ID}-00f067aa0ba902b7-01"


def test_header_provider_is_empty_outside_a_trace() -> None:
    assert trace_headers() == {}
    assert current_traceparent() == ""


def test_header_provider_gives_traceparent_and_request_id(spans: Spans) -> None:
    provider, _ = spans
    with provider.get_tracer("t").start_as_current_span("turn") as span:
        headers = trace_headers()
        trace_id = trace.format_trace_id(span.get_span_context().trace_id)
        span_id = trace.format_span_id(span.get_span_context().span_id)
    assert TRACEPARENT.match(headers["traceparent"])
    assert headers["traceparent"].startswith(f"00-{trace_id}-{span_id}-")
    assert headers["X-Request-ID"] == trace_id


def test_traceparent_round_trips_into_a_link(spans: Spans) -> None:
    provider, exporter = spans
    with provider.get_tracer("t").start_as_current_span("turn") as turn:
        origin = current_traceparent()
    assert TRACEPARENT.match(origin)
    link = link_from_traceparent(origin)
    assert link is not None
    assert link.context.span_id == turn.get_span_context().span_id
    assert link_from_traceparent("") is None
    assert link_from_traceparent("garbage") is None

    with finalisation_span(origin, checkpoint_id="cp-9", tracer_provider=provider):
        pass
    finished = {s.name: s for s in exporter.get_finished_spans()}
    final = finished[FINALISE_SPAN_NAME]
    assert final.parent is None  # a new trace ...
    assert final.context is not None and final.context.trace_id != turn.get_span_context().trace_id
    assert [lk.context.span_id for lk in final.links] == [turn.get_span_context().span_id]  # ... linked
    assert (final.attributes or {})[attr.CHECKPOINT_ID] == "cp-9"


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/api/v1/search/find", "/api/v1/search/find"),
        ("/api/v1/sessions/abc-1/messages", "/api/v1/sessions/{id}/messages"),
        ("/api/v1/sessions", "/api/v1/sessions"),
        ("/api/v1/tasks/t1", "/api/v1/tasks/{id}"),
        ("/api/v1/admin/accounts/a/users/u/key", "/api/v1/admin/accounts/{id}/users/{id}/key"),
    ],
)
def test_openviking_route(path: str, route: str) -> None:
    assert openviking_route(path) == route


async def test_openviking_middleware_one_client_span_per_attempt(spans: Spans) -> None:
    provider, exporter = spans
    seen: list[dict[str, str]] = []

    async def note_headers(request: HttpRequest, send: Send) -> HttpResponse:
        seen.append(dict(request.headers))
        return await send(request)

    with LookalikeOpenViking() as server:
        http = HttpSession(server.base_url, PoolLimits(), [OpenVikingTracing(provider), note_headers])
        try:
            with provider.get_tracer("t").start_as_current_span("rpc") as rpc:
                post = http.request(
                    "POST", "/api/v1/sessions/s-1/messages", query=[], headers=trace_headers(),
                    body=encode_json({}),
                )  # fmt: skip
                assert (await http.send(post)).status == 200
                server.status = 503
                get = http.request("GET", "/api/v1/x/fail", query=[], headers={}, body=None)
                assert (await http.send(get)).status == 503
        finally:
            await http.aclose()
    http_spans = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert [s.name for s in http_spans] == [
        "openviking POST /api/v1/sessions/{id}/messages",
        "openviking GET /api/v1/x/fail",
    ]
    ok, failed = http_spans
    assert ok.parent is not None and ok.parent.span_id == rpc.get_span_context().span_id
    assert (ok.attributes or {})[attr.HTTP_STATUS] == 200
    assert (ok.attributes or {})[attr.HTTP_METHOD] == "POST"
    assert (ok.attributes or {})[attr.SERVER_ADDRESS] == "127.0.0.1"
    assert failed.status.status_code is StatusCode.ERROR
    # OpenViking sees the HTTP span as parent and the trace id as request id.
    assert ok.context is not None
    ok_ids = f"{trace.format_trace_id(ok.context.trace_id)}-{trace.format_span_id(ok.context.span_id)}"
    assert seen[0]["traceparent"].startswith(f"00-{ok_ids}-")
    assert seen[0]["X-Request-ID"] == trace.format_trace_id(ok.context.trace_id)


# --- gRPC ------------------------------------------------------------------------------------

SERVICE = "test.v1.EchoService"


async def _echo(request: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
    if request == b"missing":
        raise NotFound("no such thing")
    if request == b"down":
        raise BackendUnavailable("OpenViking unreachable")
    return request


@pytest.fixture
async def echo_target(spans: Spans) -> AsyncIterator[str]:
    provider, _ = spans
    server = aio.server(interceptors=[TracingServerInterceptor(provider), ErrorMappingInterceptor()])
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(SERVICE, {"Echo": grpc.unary_unary_rpc_method_handler(_echo)})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


async def test_server_span_continues_the_callers_trace(spans: Spans, echo_target: str) -> None:
    _, exporter = spans
    async with aio.insecure_channel(echo_target) as channel:
        echo: aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{SERVICE}/Echo")
        assert await echo(b"hi", metadata=(("traceparent", HOST_TRACEPARENT),)) == b"hi"
        with pytest.raises(aio.AioRpcError) as missing:
            await echo(b"missing")
        with pytest.raises(aio.AioRpcError) as down:
            await echo(b"down")
    assert missing.value.code() is grpc.StatusCode.NOT_FOUND
    assert down.value.code() is grpc.StatusCode.UNAVAILABLE
    ok, not_found, unavailable = exporter.get_finished_spans()
    assert ok.name == f"{SERVICE}/Echo" and ok.kind is SpanKind.SERVER
    assert ok.context is not None and trace.format_trace_id(ok.context.trace_id) == HOST_TRACE_ID
    assert ok.parent is not None and trace.format_span_id(ok.parent.span_id) == "00f067aa0ba902b7"
    assert (ok.attributes or {})[attr.RPC_STATUS] == grpc.StatusCode.OK.value[0]
    assert (not_found.attributes or {})[attr.RPC_STATUS] == grpc.StatusCode.NOT_FOUND.value[0]
    assert not_found.status.status_code is StatusCode.UNSET  # a caller error, not a server failure
    assert (unavailable.attributes or {})[attr.RPC_STATUS] == grpc.StatusCode.UNAVAILABLE.value[0]
    assert unavailable.status.status_code is StatusCode.ERROR


async def test_client_interceptor_propagates(spans: Spans, echo_target: str) -> None:
    provider, exporter = spans
    interceptors = [TracingClientInterceptor(provider)]
    async with aio.insecure_channel(echo_target, interceptors=interceptors) as channel:
        with provider.get_tracer("t").start_as_current_span("capture.after_turn") as parent:
            echo: aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/{SERVICE}/Echo")
            assert await echo(b"hi") == b"hi"
    by_kind = {s.kind: s for s in exporter.get_finished_spans()}
    client, server = by_kind[SpanKind.CLIENT], by_kind[SpanKind.SERVER]
    assert client.parent is not None and client.parent.span_id == parent.get_span_context().span_id
    assert client.context is not None
    assert server.parent is not None and server.parent.span_id == client.context.span_id
