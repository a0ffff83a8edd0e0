"""Skill and tool memory end to end: RegisterSkills and CommitTurn on a real CaptureService, then
the Assemble sources stage reading what they stored, all against the real OpenViking."""

from __future__ import annotations

import asyncio
import time
import uuid

import grpc
import pytest
from contextengine.v1 import capture_pb2, common_pb2, envelope_pb2
from grpc import aio

from services.assembly.context_sources import ContextSources, SourceCaches, SourcesSection
from services.assembly.recall_intent import recall_intent
from shared.domain.skills import SKILL_USES_URI
from shared.domain.tool_experience import TOOL_EXPERIENCE_URI
from shared.errors import BackendNotFound
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter
from tests.capture.conftest import CaptureHost, CaptureStack, new_identity
from tests.capture.messages import assistant, tool_call, tool_result, user

pytestmark = pytest.mark.stack

SKILLS = (
    (
        "pdf-merge",
        "Merge several PDF files into one document",
        "Run qpdf --empty --pages a.pdf b.pdf -- out.pdf",
    ),
    (
        "invoice-summarize",
        "Summarize an invoice: totals, due date, vendor",
        "Read the invoice, list the totals.",
    ),
    ("dns-validate", "Validate a DNS record and report what is wrong", "Query with dig and compare."),
)


def definitions(account_suffix: str = "") -> list[capture_pb2.SkillDefinition]:
    return [
        capture_pb2.SkillDefinition(
            name=name, description=d, body=b, uri=f"skills/{name}{account_suffix}/SKILL.md"
        )
        for name, d, b in SKILLS
    ]


def tenant_of(identity: common_pb2.Identity) -> Tenant:
    return Tenant(identity.account_id, identity.user_id)


async def sources_for(
    host: CaptureHost,
    identity: common_pb2.Identity,
    prompt: str,
    newest_first: list[common_pb2.ConversationMessage],
) -> SourcesSection:
    intent = recall_intent(newest_first, 5, prompt)
    deadline = time.monotonic() + 30
    stage = ContextSources.start(
        host.openviking,
        tenant_of(identity),
        intent,
        prompt,
        newest_first,
        caches=SourceCaches(),
        deadline=deadline,
    )
    return await stage.collect(TokenCounter.for_model("", "cl100k_base"), 8000, 1000)


async def learned(host: CaptureHost, identity: common_pb2.Identity, uri: str, needle: str) -> None:
    """Wait until the lesson capture writes after the answer is in the user's document."""
    give_up = time.monotonic() + 20
    while True:
        try:
            if needle in await host.openviking.read(tenant_of(identity), uri):
                return
        except BackendNotFound:
            pass
        assert time.monotonic() < give_up, f"{uri} never held {needle!r}"
        await asyncio.sleep(0.1)


async def test_register_skills_rejects_bad_fields_by_name(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compaction=False)
    identity = new_identity()
    bad = capture_pb2.SkillDefinition(name="Bad Name!", description="x")
    with pytest.raises(aio.AioRpcError) as error:
        await host.stub.RegisterSkills(capture_pb2.RegisterSkillsRequest(identity=identity, skills=[bad]))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "skills[0].name" in (error.value.details() or "")
    empty = capture_pb2.SkillDefinition(name="ok-name", description="  ")
    with pytest.raises(aio.AioRpcError) as error:
        await host.stub.RegisterSkills(capture_pb2.RegisterSkillsRequest(identity=identity, skills=[empty]))
    assert "skills[0].description" in (error.value.details() or "")
    no_uri = capture_pb2.CommitTurnRequest(
        identity=identity,
        messages=[user("hi"), assistant("hello")],
        advancement_key="k",
        used_skills=[envelope_pb2.UsedSkill(input="x")],
    )
    with pytest.raises(aio.AioRpcError) as error:
        await host.stub.CommitTurn(no_uri)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "used_skills[0].uri" in (error.value.details() or "")


async def test_a_task_gets_its_registered_skill_and_chit_chat_none(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compaction=False)
    identity = new_identity()
    identity.account_id = f"skills-{uuid.uuid4().hex[:8]}"
    request = capture_pb2.RegisterSkillsRequest(identity=identity, skills=definitions())
    first = await host.stub.RegisterSkills(request, timeout=120)
    assert (first.stored_count, first.unchanged_count) == (3, 0)
    again = await host.stub.RegisterSkills(request, timeout=120)
    assert (again.stored_count, again.unchanged_count) == (0, 3)

    task = await sources_for(host, identity, "Can you combine these two PDFs into a single file?", [])
    assert task.skills[0].name == "pdf-merge"
    assert task.skills[0].uri == "skills/pdf-merge/SKILL.md"
    assert "pdf-merge: Merge several PDF files" in task.text
    assert task.skills[0].body_included and "qpdf" in task.text
    assert 0 < task.tokens <= 1000
    chat = await sources_for(host, identity, "what do you think about cats?", [])
    assert chat.skills == [] and "[Skills]" not in chat.text


async def test_a_failed_skill_use_is_told_for_a_similar_input(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compaction=False)
    identity = new_identity()
    identity.account_id = f"skills-{uuid.uuid4().hex[:8]}"
    await host.stub.RegisterSkills(
        capture_pb2.RegisterSkillsRequest(identity=identity, skills=definitions()), timeout=120
    )
    failed = envelope_pb2.UsedSkill(uri="pdf-merge", input="merge the scanned PDF invoices", success=False)
    await host.stub.CommitTurn(
        capture_pb2.CommitTurnRequest(
            identity=identity,
            messages=[user("merge the scanned PDF invoices"), assistant("That failed: encrypted input.")],
            advancement_key="t1",
            used_skills=[failed],
        ),
        timeout=60,
    )
    await learned(host, identity, SKILL_USES_URI, "scanned")
    section = await sources_for(host, identity, "Please merge the scanned PDF invoices from today", [])
    pdf = next(s for s in section.skills if s.name == "pdf-merge")
    assert pdf.failure_note.startswith("failed 1 of the last 1 uses for a similar input")
    assert "WARNING: failed 1" in section.text


def failing_then_fixed_turn(secret: str) -> list[common_pb2.ConversationMessage]:
    return [
        user("Read the quarterly numbers"),
        tool_call("c1", "sql_query", f'{{"query": "{secret}", "limit": "10"}}'),
        tool_result(
            "c1", "sql_query", f"TypeError: expected integer for 'limit' near {secret}", is_error=True
        ),
        tool_call("c2", "sql_query", f'{{"query": "{secret}", "limit": 10}}'),
        tool_result("c2", "sql_query", f"RAW-RESULT {secret} 42 rows"),
        assistant("Here are the numbers."),
    ]


async def test_tool_experience_is_told_to_its_user_and_never_to_another(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compaction=False)
    alice, bob = new_identity(), new_identity()
    secret = f"select-{uuid.uuid4().hex[:8]}"
    await host.stub.CommitTurn(
        capture_pb2.CommitTurnRequest(
            identity=alice, messages=failing_then_fixed_turn(secret), advancement_key="a1"
        ),
        timeout=60,
    )
    await host.stub.CommitTurn(
        capture_pb2.CommitTurnRequest(
            identity=bob,
            messages=[
                user("hello"),
                tool_call("b1", "shell", '{"cmd": "x"}'),
                tool_result("b1", "shell", "permission denied", is_error=True),
            ],
            advancement_key="b1",
        ),
        timeout=60,
    )
    await learned(host, alice, TOOL_EXPERIENCE_URI, 'fix_arguments":"{')
    await learned(host, bob, TOOL_EXPERIENCE_URI, "permission denied")  # bob's own lesson

    told = await sources_for(host, alice, "Run sql query again for the report", [])
    (experience,) = told.tool_experience
    assert experience.tool_name == "sql_query" and experience.failures == 1
    assert experience.error.startswith("TypeError: expected integer for 'limit'")
    assert experience.failing_arguments == '{"limit": string, "query": string}'
    assert experience.fix_arguments == '{"limit": number, "query": string}'
    assert "RAW-RESULT" not in told.text
    # A recent call of the tool names it too, with no prompt at all.
    loop = [tool_call("c9", "sql_query", "{}"), user("Read the quarterly numbers")]
    assert [e.tool_name for e in (await sources_for(host, alice, "", loop)).tool_experience] == ["sql_query"]

    for prompt in ("Run sql query again for the report", "Use sql_query to count the rows"):
        other = await sources_for(host, bob, prompt, [])
        assert other.tool_experience == [] and secret not in other.text and "RAW-RESULT" not in other.text
    # Each user's experience is a document in that user's own space (`viking://~` is the caller's).
    assert secret not in await host.openviking.read(tenant_of(bob), TOOL_EXPERIENCE_URI)


async def test_the_directory_lists_memories_by_category_and_skills(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compaction=False)
    identity = new_identity()
    identity.account_id = f"skills-{uuid.uuid4().hex[:8]}"
    await host.stub.RegisterSkills(
        capture_pb2.RegisterSkillsRequest(identity=identity, skills=definitions()), timeout=120
    )
    await host.stub.StoreMemory(
        capture_pb2.StoreMemoryRequest(
            identity=identity, text="Prefers tea over coffee", category="preferences"
        ),
        timeout=60,
    )
    await asyncio.sleep(0.5)
    section = await sources_for(host, identity, "Can you summarise the report I uploaded?", [])
    kinds = {(e.kind, e.uri.rsplit("/", 1)[-1]) for e in section.directory}
    assert ("memories/preferences", "preferences") in kinds
    assert {("skills", name) for name, _, _ in SKILLS} <= kinds
    assert all(".contextengine" not in e.uri for e in section.directory)
    assert "[Your OpenViking space]" in section.text
