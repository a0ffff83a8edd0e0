"""The host examples put their turn's trace context on every call (against stand-in servicers)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from contextengine.v1 import assembly_pb2, capture_pb2, common_pb2, compaction_pb2
from google.protobuf.message import Message
from grpc import aio
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from examples.python_host_turn import TurnTargets, play_turn
from shared.telemetry import TracingServerInterceptor

from .conftest import Spans

REPO = Path(__file__).resolve().parents[2]
RPCS = (
    "contextengine.v1.AssemblyService/Assemble",
    "contextengine.v1.CaptureService/AfterTurn",
    "contextengine.v1.CompactionService/Compact",
)


def _handler(request_type: type[Message], response: Message) -> grpc.RpcMethodHandler[Any, Any]:
    async def answer(request: Message, context: aio.ServicerContext[Any, Any]) -> Message:
        return response

    serialize: Callable[[Message], bytes] = lambda message: message.SerializeToString()  # noqa: E731
    return grpc.unary_unary_rpc_method_handler(
        answer, request_deserializer=request_type.FromString, response_serializer=serialize
    )


@pytest.fixture
async def standin_engine(spans: Spans) -> AsyncIterator[str]:
    provider, _ = spans
    server = aio.server(interceptors=[TracingServerInterceptor(provider)])
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "contextengine.v1.CaptureService",
                {"AfterTurn": _handler(capture_pb2.AfterTurnRequest, capture_pb2.AfterTurnResponse())},
            ),
            grpc.method_handlers_generic_handler(
                "contextengine.v1.AssemblyService",
                {"Assemble": _handler(assembly_pb2.AssembleRequest, assembly_pb2.AssembleResponse())},
            ),
            grpc.method_handlers_generic_handler(
                "contextengine.v1.CompactionService",
                {"Compact": _handler(compaction_pb2.CompactRequest, compaction_pb2.CompactResponse(ok=True))},
            ),
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


def _server_spans_by_trace(spans: Spans) -> dict[str, list[tuple[str, str]]]:
    _, exporter = spans
    found: dict[str, list[tuple[str, str]]] = {}
    for span in exporter.get_finished_spans():
        if span.kind is not SpanKind.SERVER:
            continue
        assert span.context is not None and span.parent is not None
        trace_id = trace.format_trace_id(span.context.trace_id)
        found.setdefault(trace_id, []).append((span.name, trace.format_span_id(span.parent.span_id)))
    return found


async def test_python_host_turn_propagates(spans: Spans, standin_engine: str) -> None:
    provider, _ = spans
    identity = common_pb2.Identity(account_id="a", user_id="u", session_id="s")
    turn = await play_turn(
        TurnTargets(standin_engine, standin_engine, standin_engine), identity, provider.get_tracer("host")
    )
    server_spans = _server_spans_by_trace(spans)
    assert list(server_spans) == [turn.trace_id]
    assert sorted(server_spans[turn.trace_id]) == [(rpc, turn.span_id) for rpc in RPCS]


@pytest.mark.skipif(
    shutil.which("npx") is None or not (REPO / "node_modules").is_dir(), reason="needs npm ci"
)
async def test_node_host_turn_propagates(spans: Spans, standin_engine: str) -> None:
    process = await asyncio.create_subprocess_exec(
        "npx", "tsx", "examples/node_host_turn.ts", standin_engine,
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, output.decode()
    printed_trace_id = output.decode().split("trace id: ", 1)[1].split()[0]
    server_spans = _server_spans_by_trace(spans)
    assert list(server_spans) == [printed_trace_id]
    parents = {parent for _, parent in server_spans[printed_trace_id]}
    assert len(parents) == 1  # all three calls are children of the one host.turn span
    assert sorted(name for name, _ in server_spans[printed_trace_id]) == list(RPCS)
