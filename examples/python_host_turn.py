"""A host-side turn against the engine, traced end to end.

The host opens one span per turn (`host.turn`) and sends its W3C trace context in the gRPC
metadata of every call, so Assemble, AfterTurn (and the background compaction it triggers)
and Compact, down to the OpenViking HTTP calls, land in one trace.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 \\
    .venv/bin/python examples/python_host_turn.py --target 127.0.0.1:50051

Without an OTLP endpoint the host span is still created (so the trace id is printed and
propagated) but not exported. `play_turn` is importable (the telemetry end-to-end test uses it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from dataclasses import dataclass

from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    checkpoint_pb2,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)
from grpc import aio
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Tracer

HOST_TURN_SPAN = "host.turn"


@dataclass(frozen=True)
class TurnTargets:
    """gRPC targets of the three services (the same address when they run in one process)."""

    capture: str
    assembly: str
    compaction: str


@dataclass(frozen=True)
class PlayedTurn:
    trace_id: str
    """32 hex digits: the trace of this turn."""
    span_id: str
    """16 hex digits: the `host.turn` span."""
    assemble: assembly_pb2.AssembleResponse
    after_turn: capture_pb2.AfterTurnResponse
    compact: compaction_pb2.CompactResponse | None


def _text(role: common_pb2.MessageRole.ValueType, text: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=str(uuid.uuid4()),
        role=role,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
    )


def _trace_metadata() -> tuple[tuple[str, str], ...]:
    """The current trace context as gRPC metadata (`traceparent`, `tracestate`)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return tuple(carrier.items())


async def play_turn(
    targets: TurnTargets,
    identity: common_pb2.Identity,
    tracer: Tracer,
    *,
    history: list[common_pb2.ConversationMessage] | None = None,
    prompt: str = "Which database did we pick for the billing service, and why?",
    reply: str = "PostgreSQL, because billing needs transactions across accounts.",
    compact: bool = True,
    token_budget: int = 32_000,
) -> PlayedTurn:
    """One turn: Assemble before the model call, AfterTurn after it, then (optionally) Compact,
    all under one `host.turn` span."""
    before = list(history or [])
    user = _text(common_pb2.MESSAGE_ROLE_USER, prompt)
    assistant = _text(common_pb2.MESSAGE_ROLE_ASSISTANT, reply)
    async with (
        aio.insecure_channel(targets.capture) as capture_channel,
        aio.insecure_channel(targets.assembly) as assembly_channel,
        aio.insecure_channel(targets.compaction) as compaction_channel,
    ):
        with tracer.start_as_current_span(HOST_TURN_SPAN, kind=SpanKind.INTERNAL) as span:
            metadata = _trace_metadata()
            assembled = await assembly_pb2_grpc.AssemblyServiceStub(assembly_channel).Assemble(
                assembly_pb2.AssembleRequest(
                    identity=identity, messages=[*before, user], token_budget=token_budget, prompt=prompt
                ),
                metadata=metadata,
                timeout=30,
            )
            # ... the model runs on `assembled.messages` and answers `reply` ...
            after_turn = await capture_pb2_grpc.CaptureServiceStub(capture_channel).AfterTurn(
                capture_pb2.AfterTurnRequest(
                    identity=identity,
                    messages=[*before, user, assistant],
                    pre_prompt_message_count=len(before),
                    token_budget=token_budget,
                ),
                metadata=metadata,
                timeout=30,
            )
            compacted = None
            if compact:
                compacted = await compaction_pb2_grpc.CompactionServiceStub(compaction_channel).Compact(
                    compaction_pb2.CompactRequest(
                        identity=identity, token_budget=token_budget, force=True, background=True
                    ),
                    metadata=metadata,
                    timeout=30,
                )
            context = span.get_span_context()
    return PlayedTurn(
        trace_id=trace.format_trace_id(context.trace_id),
        span_id=trace.format_span_id(context.span_id),
        assemble=assembled,
        after_turn=after_turn,
        compact=compacted,
    )


def host_tracer_provider(service_name: str = "example-host") -> TracerProvider:
    """An SDK provider exporting over OTLP/gRPC when OTEL_EXPORTER_OTLP_ENDPOINT is set."""
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter  # noqa: PLC0415

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


async def _main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", default="127.0.0.1:50051", help="all three services (--service all)")
    parser.add_argument("--capture", default=None)
    parser.add_argument("--assembly", default=None)
    parser.add_argument("--compaction", default=None)
    parser.add_argument("--session", default=f"example-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    targets = TurnTargets(
        capture=args.capture or args.target,
        assembly=args.assembly or args.target,
        compaction=args.compaction or args.target,
    )
    identity = common_pb2.Identity(
        account_id="default", user_id="default", agent_id="main", session_id=args.session
    )
    provider = host_tracer_provider()
    try:
        turn = await play_turn(targets, identity, provider.get_tracer("example-host"))
    finally:
        provider.shutdown()
    print(f"trace id: {turn.trace_id}  (Jaeger: search by trace id, or service example-host)")
    print(f"assembled: {len(turn.assemble.messages)} messages, {turn.assemble.estimated_tokens} tokens")
    print(
        f"after turn: persisted={turn.after_turn.persisted_count} "
        f"trigger={checkpoint_pb2.CompactionTrigger.Name(turn.after_turn.trigger_fired)}"
    )
    if turn.compact is not None:
        print(f"compact: ok={turn.compact.ok} reason={turn.compact.reason!r}")


if __name__ == "__main__":
    asyncio.run(_main())
