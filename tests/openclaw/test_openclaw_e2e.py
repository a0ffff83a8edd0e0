"""Issue 13 end to end: the real OpenClaw host (openclaw@2026.9.6, Node 24) drives the engine.

Through `openclaw agent` on a Gateway, with the plugin installed the way users install it and
the stand-in model scripted by the prompts (`[[call <tool> <json>]]`):

1. session A, a turn whose model calls `memory_store` with a decision; a second turn;
   `openclaw sessions compact`; a turn whose model calls `memory_expand` on the checkpoint;
2. session B asks about the decision: the model receives the `memory_recall_auto` pair with it;
3. the engine is stopped: a turn still completes (assemble passthrough, commitTurn queued by
   the host); the engine is restarted: the next turn's host retry stores the missed turn.

Then, from OpenViking: every message of every turn stored exactly once with the host's
anchors; a replayed CommitTurn answers DUPLICATE and stores nothing; and from the OTLP
receiver: the host's turn span and the services' spans share one trace id.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import grpc
import pytest
from contextengine.v1 import capture_pb2, capture_pb2_grpc, common_pb2, compaction_pb2, compaction_pb2_grpc

from services.compaction.transcript import session_messages
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.envelope import persisted_turn, provenance_of
from shared.domain.identity import RequestIdentity, parse_identity
from shared.domain.stream_state import StreamStateStore
from shared.runtime.context import build_openviking_client
from tests.openclaw.engine_process import EngineProcess
from tests.openclaw.host import AgentReply, OpenClawHost
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint
from tests.support.standin_chat import content_text
from tests.support.standin_llm import StandinLlm
from tests.telemetry.otlp_receiver import OtlpReceiver

pytestmark = pytest.mark.stack

DECISION = "Decision: the billing service uses PostgreSQL 16"
SESSION_A = "agent:main:e2e-a"
SESSION_B = "agent:main:e2e-b"


def ok(reply: AgentReply) -> AgentReply:
    assert reply.returncode == 0, f"{reply.payload}\n{reply.stderr[-3000:]}"
    return reply


def host_session_id(reply: AgentReply) -> str:
    meta = reply.payload.get("result", reply.payload).get("meta", {}).get("agentMeta", {})
    session_id = meta.get("sessionId")
    assert isinstance(session_id, str) and session_id, reply.payload
    return session_id


def requests_for(model: StandinLlm, marker: str) -> list[list[dict[str, Any]]]:
    """Message lists of the agent requests whose prompt (first user message of the turn) has `marker`."""
    found = []
    for body in model.agent_requests():
        users = [content_text(m) for m in body["messages"] if m.get("role") == "user"]
        if any(marker in text for text in users[-2:]):
            found.append(body["messages"])
    return found


def tool_exchanges(messages: list[dict[str, Any]], name: str) -> list[tuple[dict[str, Any], str]]:
    """(tool call, result text) pairs of tool `name` in a request's messages."""
    results = {m.get("tool_call_id"): content_text(m) for m in messages if m.get("role") == "tool"}
    return [
        (call, results.get(call.get("id"), ""))
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
        if call.get("function", {}).get("name") == name
    ]


def identity(session_id: str) -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id="default", user_id="default", agent_id="main", session_id=session_id
    )


def parsed(session_id: str) -> RequestIdentity:
    return parse_identity(identity(session_id), default_agent_id="main", session_required=True)


async def stored_turns(openviking: OpenVikingEndpoint, session_id: str) -> list[tuple[dict[str, Any], Any]]:
    """(provenance, persisted turn) of every message of the stream, every generation, archived or live."""
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    who = parsed(session_id)
    async with build_openviking_client(settings) as ov:
        state = await settled_stream_state(StreamStateStore(DocumentStore(ov)), who)
        rows = []
        for ov_session in state.sessions:
            for message in await session_messages(ov, who.tenant, ov_session):
                turn = persisted_turn(message)
                if turn is not None:
                    rows.append((provenance_of(message) or {}, turn))
        return rows


def assert_each_turn_once(rows: list[tuple[dict[str, Any], Any]], session_id: str, turns: int) -> list[str]:
    """Every message once (no sequence or turn id twice), grouped by turn, with the host's anchors."""
    sequences = Counter(turn.sequence for _, turn in rows)
    assert all(n == 1 for n in sequences.values()), sequences
    keys = [p.get("advancementKey") for p, _ in rows]
    assert None not in keys, "every message was stored by a fenced turn"
    by_key = Counter(keys)
    assert len(by_key) == turns, by_key
    for provenance, _ in rows:
        admission, terminal = provenance["admission"], provenance["terminal"]
        assert admission["logicalTurnId"] == provenance["advancementKey"]
        assert admission["sessionId"] == terminal["sessionId"] == session_id
        assert admission["role"] == "user" and isinstance(terminal["entryId"], str)
    users = Counter(p["advancementKey"] for p, t in rows if t.message.role == common_pb2.MESSAGE_ROLE_USER)
    assert users == Counter({key: 1 for key in by_key}), "one user message per turn"
    return list(dict.fromkeys(k for k in keys if k is not None))


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
    texts = "\n".join(t["text"] for t in expansion["turns"])
    assert "We decided: PostgreSQL 16 for billing." in texts and "deploy window is Friday" in texts, expansion

    # --- session B: auto recall carries the decision ---
    asked = ok(openclaw.agent(SESSION_B, "Which database did we decide on for the billing service?"))
    session_b = host_session_id(asked)
    recall = tool_exchanges(requests_for(model, "Which database did we decide")[0], "memory_recall_auto")
    assert recall and DECISION in recall[0][1], recall
    # the turn index: the conversation itself is recalled, not only what was stored explicitly
    assert "We decided: PostgreSQL 16 for billing." in recall[0][1], recall

    # --- engine down: passthrough, then the host's retry stores the missed turn once ---
    engine.stop()
    ok(openclaw.agent(SESSION_B, "Offline turn: the on-call rotation starts Monday."))
    [offline] = requests_for(model, "Offline turn")
    assert not tool_exchanges(offline, "memory_recall_auto"), "assemble passed the host's messages through"
    engine.start()
    ok(openclaw.agent(SESSION_B, "Back online: thanks, that is all."))

    # --- exactly once, with anchors; a replay is DUPLICATE and stores nothing ---
    rows_a = asyncio.run(stored_turns(openviking, session_a))
    keys_a = assert_each_turn_once(rows_a, session_a, turns=3)
    rows_b = asyncio.run(stored_turns(openviking, session_b))
    keys_b = assert_each_turn_once(rows_b, session_b, turns=3)
    offline_key = keys_b[1]
    offline_texts = [
        t.message.content[0].text.text
        for p, t in rows_b
        if p["advancementKey"] == offline_key and t.message.role == common_pb2.MESSAGE_ROLE_USER
    ]
    assert len(offline_texts) == 1 and "Offline turn" in offline_texts[0]
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
