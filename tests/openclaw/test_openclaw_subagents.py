"""Subagents and the sender's identity on the real host (openclaw@2026.9.6, Gateway): a session
that is one sender's (`agent:main:direct:<peer>`, the key `session.dmScope: "per-peer"` gives a
direct-message peer) spawns a subagent through the host's `sessions_spawn` tool. The child's
model request carries the parent's context packet in its system prompt; when the child ends, its
answer is in the parent's stream, which is the sender's, not the config's default user."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.openclaw.engine_process import EngineProcess
from tests.openclaw.host import E2E_TIMEOUT_SECONDS, OpenClawHost
from tests.openclaw.scenarios import host_session_id, ok, stored_turns
from tests.support.stack import OpenVikingEndpoint
from tests.support.standin_chat import content_text
from tests.support.standin_llm import StandinLlm

pytestmark = pytest.mark.stack

PARENT = "agent:main:direct:alice"
SENDER = "alice"
FACT = "Fact for the helper: the staging cluster runs in eu-west-3."
TASK = "Helper task: list the staging nodes."
DELEGATE = "Delegate it."
RESULT_WAIT_SECONDS = 240.0


def child_requests(model: StandinLlm) -> list[list[dict[str, Any]]]:
    """The child's model requests: the task is in its prompt, the parent's request is not."""
    found = []
    for body in model.agent_requests():
        users = [content_text(m) for m in body["messages"] if m.get("role") == "user"]
        if any(TASK in u for u in users) and not any(DELEGATE in u for u in users):
            found.append(body["messages"])
    return found


def stored_texts(rows: list[tuple[dict[str, Any], Any]]) -> list[str]:
    return [b.text.text for _, t in rows for b in t.message.content if b.WhichOneof("block") == "text"]


def subagent_results(openviking: OpenVikingEndpoint, session_id: str) -> list[str]:
    texts = stored_texts(asyncio.run(stored_turns(openviking, session_id, SENDER)))
    return [t for t in texts if t.startswith("[Subagent ")]


@pytest.mark.timeout(E2E_TIMEOUT_SECONDS)
def test_a_subagent_starts_with_its_parents_context_and_its_result_lands_in_the_parent(
    openclaw: OpenClawHost, model: StandinLlm, engine: EngineProcess, openviking: OpenVikingEndpoint
) -> None:
    session_id = host_session_id(ok(openclaw.agent(PARENT, FACT)))
    spawn = {"id": "sessions_spawn", "args": {"task": TASK}}
    ok(openclaw.agent(PARENT, f"{DELEGATE} [[call tool_call {json.dumps(spawn)}]]"))

    deadline = time.monotonic() + RESULT_WAIT_SECONDS
    while not subagent_results(openviking, session_id) and time.monotonic() < deadline:
        time.sleep(3)
    [result] = subagent_results(openviking, session_id)
    assert result.startswith("[Subagent agent:main:subagent:") and " completed]\n" in result, result

    [first, *_] = child_requests(model)
    system = content_text(first[0])
    assert f"Context from the parent session {PARENT}" in system and FACT in system, system[-3000:]
    # the parent's turns are the sender's: stored for user "alice"
    said = stored_texts(asyncio.run(stored_turns(openviking, session_id, SENDER)))
    assert FACT in said, said
