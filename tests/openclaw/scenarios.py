"""The OpenClaw end-to-end scenarios and what they read back, shared by the tests of each pinned
host (`test_openclaw_e2e` on the newest release, `test_openclaw_oldest` on the oldest claimed)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from contextengine.v1 import common_pb2

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


def user_texts_by_turn(rows: list[tuple[dict[str, Any], Any]]) -> list[str]:
    """Each stored turn's user text, in stream order."""
    ordered = sorted(rows, key=lambda row: row[1].sequence)
    return [
        t.message.content[0].text.text for _, t in ordered if t.message.role == common_pb2.MESSAGE_ROLE_USER
    ]


def identity(session_id: str, user: str = "default") -> common_pb2.Identity:
    return common_pb2.Identity(account_id="default", user_id=user, agent_id="main", session_id=session_id)


def parsed(session_id: str, user: str = "default") -> RequestIdentity:
    return parse_identity(identity(session_id, user), default_agent_id="main", session_required=True)


async def stored_turns(
    openviking: OpenVikingEndpoint, session_id: str, user: str = "default"
) -> list[tuple[dict[str, Any], Any]]:
    """(provenance, persisted turn) of every message of the stream, every generation, archived or live."""
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    who = parsed(session_id, user)
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
        # a turn the host ran without the engine is stored from its transcript: no entry anchors
        assert admission["role"] == "user" and (
            terminal.get("recovered") or isinstance(terminal["entryId"], str)
        )
    users = Counter(p["advancementKey"] for p, t in rows if t.message.role == common_pb2.MESSAGE_ROLE_USER)
    assert users == Counter({key: 1 for key in by_key}), "one user message per turn"
    return list(dict.fromkeys(k for k in keys if k is not None))


def assert_one_recall_pair_per_request(model: StandinLlm) -> None:
    """However often the host called assemble for it, no model request had two recall pairs."""
    for body in model.agent_requests():
        assert len(tool_exchanges(body["messages"], "memory_recall_auto")) <= 1, body["messages"]


OUTAGE_MARKERS = ["Offline turn D2", "Offline turn D3", "Back online D4"]


def outage_sequence(
    openclaw: OpenClawHost, model: StandinLlm, engine: EngineProcess, session_key: str
) -> None:
    """Engine down for two turns (D2's commitTurn fails; D3 retries D2's key, fails and runs on
    the host's built-in engine), then back for D4. What must be stored: `assert_outage_stored`."""
    engine.stop()
    ok(openclaw.agent(session_key, f"{OUTAGE_MARKERS[0]}: the on-call rotation starts Monday."))
    ok(openclaw.agent(session_key, f"{OUTAGE_MARKERS[1]}: the pager number is 4711."))
    for marker in OUTAGE_MARKERS[:2]:
        assert not any(tool_exchanges(r, "memory_recall_auto") for r in requests_for(model, marker)), marker
    engine.start()
    ok(openclaw.agent(session_key, f"{OUTAGE_MARKERS[2]}: thanks, that is all."))


def assert_outage_stored(rows: list[tuple[dict[str, Any], Any]], session_id: str, first: str) -> None:
    """The session's first turn (its user text has `first`), then D2, D3, D4: each once, in order."""
    assert_each_turn_once(rows, session_id, turns=4)
    said = user_texts_by_turn(rows)
    markers = [first, *OUTAGE_MARKERS]
    assert [[m for m in markers if m in text] for text in said] == [[m] for m in markers], said
