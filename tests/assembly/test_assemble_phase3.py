"""Assemble with the recall intent and the Phase-3 sources, over real gRPC and the real OpenViking."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest
from contextengine.v1 import assembly_pb2, common_pb2, packet_pb2

from services.assembly.pool_depth import HEADROOM
from services.assembly.recall import TURN_CANDIDATES
from services.assembly.skill_selection import SKILL_CANDIDATES
from services.capture.skill_registry import register_skills
from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.skills import SKILL_ROOT, Skill
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from tests.assembly.conftest import assembly_stub
from tests.assembly.helpers import RequestRecorder, assistant, user
from tests.support.call_log import CallLog
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

SETTINGS = Settings(shutdown_grace_seconds=0.1, recall_timeout_ms=30_000, recall_token_budget=1000)


@pytest.fixture
async def tenant(openviking: OpenVikingEndpoint) -> AsyncIterator[Tenant]:
    tenant = Tenant(f"p3-{uuid.uuid4().hex[:8]}", "alice")
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        skills = [
            Skill(
                "pdf-merge",
                "Merge several PDF files into one document",
                "Use qpdf to merge.",
                "skills/pdf-merge",
            ),
            Skill("dns-validate", "Validate a DNS record and report what is wrong", "Use dig.", "skills/dns"),
        ]
        await register_skills(client, DocumentStore(client), tenant, skills, deadline=time.monotonic() + 120)
    yield tenant


def request(
    tenant: Tenant, prompt: str, *history: common_pb2.ConversationMessage
) -> assembly_pb2.AssembleRequest:
    identity = assembly_pb2.AssembleRequest().identity
    identity.account_id, identity.user_id, identity.agent_id, identity.session_id = (
        tenant.account_id,
        tenant.user_id,
        "main",
        "s1",
    )
    messages = [*history, user(prompt)]
    return assembly_pb2.AssembleRequest(
        identity=identity, messages=messages, prompt=prompt, token_budget=8000
    )


async def test_a_task_gets_its_skill_within_the_budget_and_the_packet_says_why(
    openviking: OpenVikingEndpoint, tenant: Tenant
) -> None:
    async with (
        OpenVikingClient(openviking.base_url, DevAuth()) as client,
        assembly_stub(SETTINGS, client) as stub,
    ):
        reply = await stub.Assemble(
            request(tenant, "Can you combine these two PDFs into one file?"), timeout=60
        )
    packet = reply.packet
    assert packet.recall_intent.recall
    assert packet_pb2.RECALL_SOURCE_SKILLS in packet.recall_intent.sources
    assert packet.skills[0].name == "pdf-merge"
    assert "pdf-merge: Merge several PDF files" in reply.system_prompt_addition
    assert packet.tokens.skills > 0 and packet.tokens.directory > 0
    assert packet.tokens.used <= packet.tokens.budget == 8000
    assert reply.estimated_tokens == packet.estimated_tokens


async def test_a_task_embeds_its_prompt_once_for_its_memories_and_its_skills(
    openviking: OpenVikingEndpoint, tenant: Tenant
) -> None:
    recorder = RequestRecorder()
    async with (
        OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[recorder]) as client,
        assembly_stub(SETTINGS, client) as stub,
    ):
        await stub.Assemble(request(tenant, "What did I say I prefer?"), timeout=60)  # the profile, cached
        recorder.requests.clear()
        task = await stub.Assemble(request(tenant, "please validate the dns record of my domain"), timeout=60)
        finds_of_task = recorder.finds()
        recorder.requests.clear()
        question = await stub.Assemble(request(tenant, "When did we last talk about DNS?"), timeout=60)
        finds_of_question = recorder.finds()
        held = await client.find(tenant, "dns", target_uri="viking://~/memories", limit=TURN_CANDIDATES)
    assert [s.name for s in task.packet.skills][:1] == ["dns-validate"]
    # One find over both roots, as deep into the memories as the first call saw the user hold.
    depth = min(TURN_CANDIDATES, len(held.memories) + HEADROOM)
    assert [(f["target_uri"], f["limit"]) for f in finds_of_task] == [
        (["viking://~/memories", SKILL_ROOT], depth + SKILL_CANDIDATES)
    ]
    # A question about the past asks for no skills: recall's find alone, as before.
    assert not question.packet.skills
    assert [(f["target_uri"], f["limit"]) for f in finds_of_question] == [
        ("viking://~/memories", TURN_CANDIDATES)
    ]


async def test_a_greeting_and_a_follow_up_recall_nothing(
    openviking: OpenVikingEndpoint, tenant: Tenant
) -> None:
    log = CallLog()
    async with (
        OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[log]) as client,
        assembly_stub(SETTINGS, client) as stub,
    ):
        history = (user("How should we plan the party?"), assistant("First the budget, second the venue."))
        await stub.Assemble(request(tenant, "warm up the profile cache", *history), timeout=60)
        mark = log.mark()
        greeting = await stub.Assemble(request(tenant, "thanks!", *history), timeout=60)
        follow_up = await stub.Assemble(
            request(tenant, "make the second point shorter", *history), timeout=60
        )
    for reply, reason in ((greeting, "greeting"), (follow_up, "follow_up")):
        assert (reply.packet.recall_intent.recall, reply.packet.recall_intent.reason) == (False, reason)
        assert reply.packet.recall_skip_reason == reason
        assert not reply.packet.recalled_memories and not reply.packet.skills
        assert reply.packet.tokens.recall == reply.packet.tokens.skills == 0
    assert not [c for c in log.calls[mark:] if c.route.endswith("/search/find")]
