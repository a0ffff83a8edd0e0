"""Subagents through the plugin (built, in Node) and the real engine, with OpenClaw 2026.9.6's
`prepareSubagentSpawn` / `onSubagentEnded` shapes: the child starts with a bounded packet of
its parent's context, its turns are its parent's user's, and its result lands in the parent's
stream once, however many end notices the host sends."""

from __future__ import annotations

import pytest

from shared.localstack.processes import free_port
from shared.runtime.main import ServiceHost
from tests.openclaw.plugin_driver import HostTurns, call, drive
from tests.openclaw.scenarios import stored_turns
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

PARENT_KEY = "agent:main:telegram:direct:4242"
PARENT_USER = "telegram.4242"
CHILD_KEY = "agent:main:subagent:helper-1"
FACT = "The staging cluster runs in eu-west-3 on three nodes."
REQUEST = "Spawn a helper to check the staging cluster."
RESULT = "Staging check done: all 3 nodes healthy."
PACKET_BOUND = 8_000 + 200
"""`PACKET_CHARS` of the plugin, plus its header line."""


def texts(rows: list[tuple[dict[str, object], object]]) -> list[str]:
    return [b.text.text for _, t in rows for b in t.message.content if b.WhichOneof("block") == "text"]  # type: ignore[attr-defined]


async def test_a_subagent_gets_its_parents_context_and_its_result_is_captured_into_the_parent(
    engine_in_process: ServiceHost, openviking: OpenVikingEndpoint
) -> None:
    config = {"agentId": "main", "engine": {"target": engine_in_process.address}}
    parent = HostTurns(f"parent-{free_port()}", PARENT_KEY)
    child = HostTurns(f"child-{free_port()}", CHILD_KEY)

    first = [parent.assemble(FACT)]
    parent.run("p1", FACT)
    first.append(parent.commit("p1"))
    spawning = [
        parent.assemble(REQUEST),
        # as 2026.9.6 prepares an isolated child: no session ids, only keys
        call(
            "prepareSubagentSpawn",
            parentSessionKey=PARENT_KEY,
            childSessionKey=CHILD_KEY,
            contextMode="isolated",
            parentSessionFile=PARENT_KEY,
            childSessionFile=CHILD_KEY,
        ),
    ]
    child_turn = [child.assemble("Check the staging cluster's nodes.")]
    child.run("c1", "Check the staging cluster's nodes.", answer=RESULT)
    child_turn.append(child.commit("c1"))
    ends = [[call("onSubagentEnded", childSessionKey=CHILD_KEY, reason=r)] for r in ("completed", "deleted")]

    results = await drive(config, [first, spawning, child_turn, *ends])

    packet = results[4]["value"].get("systemPromptAddition", "")
    assert FACT in packet and f"user (the request in progress): {REQUEST}" in packet, packet
    assert PARENT_KEY in packet and len(packet) <= PACKET_BOUND
    assert results[5] == {"value": {"status": "committed"}}, results
    # the child's turn is stored for the parent's user (its sender), not the config's default
    assert RESULT in texts(await stored_turns(openviking, child.session_id, PARENT_USER))
    # the parent's stream: its own turn, then the child's result, once
    in_parent = texts(await stored_turns(openviking, parent.session_id, PARENT_USER))
    assert FACT in in_parent and sum(RESULT in t for t in in_parent) == 1, in_parent
    assert [t for t in in_parent if RESULT in t] == [f"[Subagent {CHILD_KEY} completed]\n{RESULT}"]
