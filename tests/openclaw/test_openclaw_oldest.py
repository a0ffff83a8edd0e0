"""The oldest OpenClaw release the plugin claims (`peerDependencies`), 2026.9.5, runs it the
same way as the newest: a fact stored in one session is recalled in another as one
`memory_recall_auto` pair per model request, and the outage sequence (engine down for D2 and
D3, back for D4) stores every turn once, in order. The newest host's run covers the rest
(`test_openclaw_e2e`); this one is kept to what a compatibility claim needs, to bound the
suite's time.

Why not older: 2026.9.1, 2026.9.3 and 2026.9.4 (run with this test; 2026.9.2 not tried) call
`assemble` and get the recall pair back, but it is not in the model's request.
"""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import pytest
from contextengine.v1 import assembly_pb2, assembly_pb2_grpc, common_pb2

from tests.openclaw.engine_process import EngineProcess
from tests.openclaw.host import E2E_TIMEOUT_SECONDS, OpenClawHost
from tests.openclaw.scenarios import (
    assert_one_recall_pair_per_request,
    assert_outage_stored,
    host_session_id,
    ok,
    outage_sequence,
    requests_for,
    stored_turns,
    tool_exchanges,
)
from tests.openclaw.toolchain import OLDEST_OPENCLAW_VERSION
from tests.support.stack import OpenVikingEndpoint
from tests.support.standin_llm import StandinLlm

pytestmark = pytest.mark.stack

OPENCLAW_HOST_VERSION = OLDEST_OPENCLAW_VERSION
FACT = "Fact: the staging cluster runs in eu-west-3"


async def recallable(engine: EngineProcess, text: str, seconds: float = 120.0) -> None:
    """Wait until OpenViking has indexed the stored memory (asynchronous on its side), so the
    next turn's recall can find it."""
    query = common_pb2.Identity(account_id="default", user_id="default", agent_id="main")
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(engine.target) as channel:
        stub = assembly_pb2_grpc.AssemblyServiceStub(channel)
        while time.monotonic() < deadline:
            found = await stub.RecallMemories(assembly_pb2.RecallMemoriesRequest(identity=query, query=text))
            if any(text in m.content or text in m.abstract for m in found.memories):
                return
            await asyncio.sleep(2)
    raise AssertionError(f"{text!r} was not recallable within {seconds} s")


@pytest.mark.timeout(E2E_TIMEOUT_SECONDS)
def test_the_oldest_claimed_host_recalls_once_and_loses_nothing_in_an_outage(
    openclaw: OpenClawHost, model: StandinLlm, engine: EngineProcess, openviking: OpenVikingEndpoint
) -> None:
    stored = ok(
        openclaw.agent("agent:main:old-a", f'Remember this. [[call memory_store {{"text": "{FACT}"}}]]')
    )
    [(_, result)] = tool_exchanges(requests_for(model, "Remember this.")[-1], "memory_store")
    assert json.loads(result)["uri"].startswith("viking://") and host_session_id(stored)

    asyncio.run(recallable(engine, FACT))
    session_key = "agent:main:old-b"
    asked = ok(openclaw.agent(session_key, "Where does the staging cluster run?"))
    recall = tool_exchanges(
        requests_for(model, "Where does the staging cluster run")[0], "memory_recall_auto"
    )
    assert len(recall) == 1 and FACT in recall[0][1], recall

    outage_sequence(openclaw, model, engine, session_key)
    assert_one_recall_pair_per_request(model)
    session_id = host_session_id(asked)
    assert_outage_stored(
        asyncio.run(stored_turns(openviking, session_id)), session_id, "Where does the staging"
    )
