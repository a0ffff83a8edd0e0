"""Issue 13 end to end: the real OpenClaw host (openclaw@2026.9.6, Node 24) drives the engine.

Through `openclaw agent` on a Gateway, with the plugin installed the way users install it and
the stand-in model scripted by the prompts (`[[call <tool> <json>]]`):

1. session A, a turn whose model calls `memory_store` with a decision; a second turn;
   `openclaw sessions compact`; a turn whose model calls `memory_expand` on the checkpoint;
2. session B asks about the decision: the model receives one `memory_recall_auto` pair with it
   (one per model request, however often the host calls assemble);
3. the engine is stopped: turn D2 still completes (assemble passthrough, its commitTurn fails
   and is queued by the host); turn D3 retries D2's key, fails and runs on the host's built-in
   engine; the engine is restarted: turn D4 stores D2 (the host's retry), D3 (the plugin finds
   it in the transcript) and D4, each once, in that order.

Then, from OpenViking: every message of every turn stored exactly once with the host's
anchors; a replayed CommitTurn answers DUPLICATE and stores nothing; and from the OTLP
receiver: the host's turn span and the services' spans share one trace id.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest
from contextengine.v1 import capture_pb2, capture_pb2_grpc, common_pb2, compaction_pb2, compaction_pb2_grpc

from tests.openclaw.engine_process import EngineProcess
from tests.openclaw.host import E2E_TIMEOUT_SECONDS, OpenClawHost
from tests.openclaw.scenarios import (
    assert_each_turn_once,
    assert_one_recall_pair_per_request,
    assert_outage_stored,
    host_session_id,
    identity,
    ok,
    outage_sequence,
    requests_for,
    stored_turns,
    tool_exchanges,
)
from tests.support.stack import OpenVikingEndpoint
from tests.support.standin_chat import content_text
from tests.support.standin_llm import StandinLlm
from tests.telemetry.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.stack

DECISION = "Decision: the billing service uses PostgreSQL 16"
SESSION_A = "agent:main:e2e-a"
SESSION_B = "agent:main:e2e-b"


async def replay(
    engine: EngineProcess, session_id: str, key: str, rows: list[tuple[dict[str, Any], Any]]
) -> capture_pb2.CommitTurnResponse:
    messages = [turn.message for p, turn in rows if p["advancementKey"] == key]
    provenance = next(p for p, _ in rows if p["advancementKey"] == key)
    async with grpc.aio.insecure_channel(engine.target) as channel:
        return await capture_pb2_grpc.CaptureServiceStub(channel).CommitTurn(
            capture_pb2.CommitTurnRequest(
                identity=identity(session_id),
                messages=messages,
                advancement_key=key,
                admission=common_pb2.JsonValue(json=json.dumps(provenance["admission"])),
                terminal=common_pb2.JsonValue(json=json.dumps(provenance["terminal"])),
            )
        )


async def checkpoints(engine: EngineProcess, session_id: str) -> list[Any]:
    async with grpc.aio.insecure_channel(engine.target) as channel:
        response = await compaction_pb2_grpc.CompactionServiceStub(channel).ListCheckpoints(
            compaction_pb2.ListCheckpointsRequest(identity=identity(session_id))
        )
    return list(response.checkpoints)


@pytest.mark.timeout(E2E_TIMEOUT_SECONDS)
def test_openclaw_drives_the_engine_end_to_end(
    openclaw: OpenClawHost,
    model: StandinLlm,
    engine: EngineProcess,
    receiver: OtlpReceiver,
    openviking: OpenVikingEndpoint,
) -> None:
    # --- session A: a tool call, a second turn, compact, memory_expand ---
    first = ok(
        openclaw.agent(
            SESSION_A,
            f'We decided: PostgreSQL 16 for billing. [[call memory_store {{"text": "{DECISION}"}}]]',
        )
    )
    session_a = host_session_id(first)
    [(_, stored)] = tool_exchanges(requests_for(model, "We decided: PostgreSQL 16")[-1], "memory_store")
    assert json.loads(stored)["uri"].startswith("viking://"), stored
    ok(openclaw.agent(SESSION_A, "Second turn: the deploy window is Friday 18:00 UTC."))

    compacted = openclaw.compact(SESSION_A)
    assert compacted.returncode == 0, compacted.stdout + compacted.stderr
    checkpoint = asyncio.run(checkpoints(engine, session_a))[-1]
    ok(
        openclaw.agent(
            SESSION_A,
            f'Expand it. [[call memory_expand {{"summaryOrMemoryUri": "{checkpoint.checkpoint_id}"}}]]',
        )
    )
    [(_, expanded)] = tool_exchanges(requests_for(model, "Expand it.")[-1], "memory_expand")
    expansion = json.loads(expanded)
    assert expansion["checkpointId"] == checkpoint.checkpoint_id
    # each turn in the host's own shape: roles by name, text, tool calls with their arguments
    messages = [t["message"] for t in expansion["turns"]]
    assert {m["role"] for m in messages} >= {"user", "assistant", "toolResult"}, messages
    texts = "\n".join(content_text(m) for m in messages if m["role"] == "user")
    assert "We decided: PostgreSQL 16 for billing." in texts and "deploy window is Friday" in texts, expansion
    [store_call] = [
        b for m in messages if m["role"] == "assistant" for b in m["content"] if b.get("type") == "toolCall"
    ]
    assert store_call["name"] == "memory_store" and store_call["arguments"] == {"text": DECISION}
    [store_result] = [m for m in messages if m["role"] == "toolResult"]
    assert store_result["toolName"] == "memory_store" and "viking://" in store_result["content"][0]["text"]

    # --- session B: auto recall carries the decision, once ---
    asked = ok(openclaw.agent(SESSION_B, "Which database did we decide on for the billing service?"))
    session_b = host_session_id(asked)
    [first_request, *_] = requests_for(model, "Which database did we decide")
    recall = tool_exchanges(first_request, "memory_recall_auto")
    assert len(recall) == 1 and DECISION in recall[0][1], recall
    # the turn index: the conversation itself is recalled, not only what was stored explicitly
    assert "We decided: PostgreSQL 16 for billing." in recall[0][1], recall

    # --- engine down for D2 and D3, back for D4 ---
    outage_sequence(openclaw, model, engine, SESSION_B)
    assert_one_recall_pair_per_request(model)

    # --- exactly once, with anchors; a replay is DUPLICATE and stores nothing ---
    rows_a = asyncio.run(stored_turns(openviking, session_a))
    keys_a = assert_each_turn_once(rows_a, session_a, turns=3)
    # D2 (the host's retry), D3 (run on the host's built-in engine, found in the transcript by
    # its run) and D4, each once, in order
    assert_outage_stored(asyncio.run(stored_turns(openviking, session_b)), session_b, "Which database")
    replayed = asyncio.run(replay(engine, session_a, keys_a[0], rows_a))
    assert replayed.status == capture_pb2.COMMIT_TURN_STATUS_DUPLICATE and replayed.persisted_count == 0
    assert len(asyncio.run(stored_turns(openviking, session_a))) == len(rows_a)

    # --- one trace per turn across the host and the services ---
    spans, _ = receiver.snapshot()
    turn_traces = {s.trace_id for s in spans if s.service == "openclaw" and s.name == "openclaw.turn"}
    served = {
        s.name.rsplit("/", 1)[-1]: s.trace_id
        for s in spans
        if s.service != "openclaw" and s.name.startswith("contextengine.v1.")
    }
    for rpc in ("Assemble", "CommitTurn", "StoreMemory", "ExpandMemory", "Compact"):
        assert rpc in served, sorted(served)
    shared = [
        t
        for t in turn_traces
        if {"Assemble", "CommitTurn"} <= {s.name.rsplit("/", 1)[-1] for s in spans if s.trace_id == t}
    ]
    assert shared, "a turn's host span, Assemble and CommitTurn share one trace id"
