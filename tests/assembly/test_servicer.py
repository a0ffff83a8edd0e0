"""AssemblyService on a real in-process gRPC server, with a local stand-in for OpenViking."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from contextengine.v1 import assembly_pb2, common_pb2, packet_pb2
from grpc import aio

from services.assembly.assemble import retrieval_deadline
from shared.config import Settings
from tests.assembly.conftest import assembly_stub
from tests.assembly.helpers import FakeBackend, FixedSummaries, assistant, hit, tool_result, user

M = "viking://user/alice/memories"
IDENTITY = common_pb2.Identity(account_id="acme", user_id="alice", agent_id="main", session_id="s1")
SETTINGS = Settings(shutdown_grace_seconds=0.1, recall_timeout_ms=300, recent_raw_turn_count=2)


def transcript() -> list[common_pb2.ConversationMessage]:
    return [
        user("what is the capital of france"),
        assistant("Paris."),
        user("list my files please"),
        assistant("", [("c1", "ls")]),
        tool_result("c1", "a.txt b.txt"),
        assistant("a.txt and b.txt"),
        user("which text editor do I prefer for coding"),
    ]


def backend() -> FakeBackend:
    return FakeBackend(
        user_hits=[hit(f"{M}/preferences/editor.md", 0.8, "User prefers vim for coding")],
        agent_hits=[hit(f"{M}/notes/n.md", 0.6, "Agent note: user codes in rust", tags=["agent=main"])],
        files={"viking://~/memories/profile.md": "Alice, a backend engineer."},
    )


def test_retrieval_deadline() -> None:
    assert retrieval_deadline(100.0, None, 5000) == 105.0
    assert retrieval_deadline(100.0, 1.0, 5000) == pytest.approx(100.8)
    assert retrieval_deadline(100.0, 0.0, 5000) == pytest.approx(100.01)


async def test_assemble_injects_recall_profile_and_summary() -> None:
    summaries = FixedSummaries(
        [packet_pb2.CompactSummary(session_uri="viking://x", overview="Earlier: talked about Paris.")]
    )
    async with assembly_stub(SETTINGS, backend(), summaries) as stub:
        reply = await stub.Assemble(assembly_pb2.AssembleRequest(identity=IDENTITY, messages=transcript()))
    packet = reply.packet
    assert not packet.degraded, packet.degraded_reasons
    assert packet.recall_query.endswith("which text editor do I prefer for coding")
    assert {m.uri.rsplit("/", 1)[1] for m in packet.recalled_memories} == {"editor.md", "n.md"}
    assert reply.system_prompt_addition.startswith("[User Profile]\nAlice")
    texts = [m.content[0].text.text if m.content[0].HasField("text") else "" for m in reply.messages]
    # Summary first, then the 2 newest raw turns (the older turn is replaced by the summary),
    # then the recall pair right after the newest user message.
    assert texts[0].startswith("[Session History Summary]\nEarlier")
    assert [m.role for m in reply.messages[1:5]] == [1, 2, 3, 2]
    call, result = reply.messages[-2:]
    assert call.content[0].tool_call.name == "memory_recall_auto"
    assert result.content[0].tool_result.tool_call_id == call.content[0].tool_call.id
    payload = json.loads(result.content[0].tool_result.content[0].text.text)
    assert payload["source"] == "openviking-auto-recall" and len(payload["memories"]) == 2
    assert len(packet.recent_raw_turns) == 5 and len(packet.injected_messages) == 3
    assert reply.estimated_tokens == packet.tokens.used <= SETTINGS.default_token_budget


async def test_slow_backend_degrades_but_keeps_raw_turns() -> None:
    slow = backend()
    slow.delay = 2.0
    async with assembly_stub(SETTINGS, slow, FixedSummaries(delay=2.0)) as stub:
        started = time.monotonic()
        reply = await stub.Assemble(
            assembly_pb2.AssembleRequest(identity=IDENTITY, messages=transcript(), token_budget=30)
        )
        assert time.monotonic() - started < 1.5
    assert reply.packet.degraded and any("timed out" in r for r in reply.packet.degraded_reasons)
    assert not reply.packet.recalled_memories
    assert list(reply.messages)[-5:] == transcript()[-5:]
    assert reply.packet.tokens.over_budget


async def test_recall_off_no_retrieval() -> None:
    fake = backend()
    settings = SETTINGS.model_copy(update={"auto_recall": False})
    async with assembly_stub(settings, fake, FixedSummaries()) as stub:
        reply = await stub.Assemble(assembly_pb2.AssembleRequest(identity=IDENTITY, messages=transcript()))
    assert fake.finds == [] and reply.packet.recall_skip_reason == "auto_recall_disabled"
    assert list(reply.messages) == transcript() and not reply.packet.degraded


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (assembly_pb2.AssembleRequest(identity=IDENTITY, token_budget=-1), "token_budget"),
        (assembly_pb2.AssembleRequest(identity=common_pb2.Identity(session_id="s")), "identity.user_id"),
        (
            assembly_pb2.AssembleRequest(identity=IDENTITY, messages=[common_pb2.ConversationMessage()]),
            "messages[0].role",
        ),
        (
            assembly_pb2.AssembleRequest(identity=IDENTITY, messages=[user("x"), tool_result("", "r")]),
            "messages[1].content[0].tool_result.tool_call_id",
        ),
    ],
)
async def test_invalid_requests_name_the_field(request_: assembly_pb2.AssembleRequest, field: str) -> None:
    async with assembly_stub(SETTINGS, backend()) as stub:
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.Assemble(request_)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(field + ":")


async def test_recall_memories_and_fallback() -> None:
    async with assembly_stub(SETTINGS, backend()) as stub:
        reply = await stub.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=IDENTITY, query="preferred editor", limit=1)
        )
        assert len(reply.memories) == 1 and not reply.degraded
        assert json.loads(reply.tool_result.json)["source"] == "openviking-recall"
        fallback = await stub.RecallFallback(
            assembly_pb2.RecallFallbackRequest(identity=IDENTITY, prompt="which editor do I prefer")
        )
        assert fallback.prepend_context.startswith("<relevant-memories>\n")
        assert "- [preferences] User prefers vim for coding" in fallback.prepend_context
        assert fallback.estimated_tokens > 0
        greeting = await stub.RecallFallback(
            assembly_pb2.RecallFallbackRequest(identity=IDENTITY, prompt="hi")
        )
        assert greeting.prepend_context == ""
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.RecallMemories(assembly_pb2.RecallMemoriesRequest(identity=IDENTITY, query=" "))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    disabled = SETTINGS.model_copy(update={"fallback_recall_enabled": False})
    async with assembly_stub(disabled, backend()) as stub:
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.RecallFallback(assembly_pb2.RecallFallbackRequest(identity=IDENTITY, prompt="x"))
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
