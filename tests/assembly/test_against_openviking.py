"""AssemblyService on a real in-process gRPC server against the real local OpenViking."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest
from contextengine.v1 import assembly_pb2, common_pb2, packet_pb2

from shared.config import Settings
from shared.domain.memory_scope import AGENT, scope_tags
from shared.domain.recall_handles import handle_for
from shared.localstack.processes import free_port
from shared.openviking import DevAuth, OpenVikingClient, RetryPolicy, Tenant
from tests.assembly.conftest import assembly_stub
from tests.assembly.helpers import assistant, user
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

RUN = uuid.uuid4().hex[:8]
ACCOUNT = f"ce-asm-{RUN}"
SETTINGS = Settings(shutdown_grace_seconds=0.1, recall_timeout_ms=10_000)
DRINK_FACT = "Alice prefers green tea over coffee."
EDITOR_FACT = "Alice always codes in the Helix editor with a dark solarized theme."


def identity(user_id: str, session: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user_id, agent_id="Main", session_id=session)


@pytest.fixture(scope="module")
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        alice = Tenant(ACCOUNT, "alice")
        await client.write(
            alice,
            "viking://~/memories/notes/editor.md",
            EDITOR_FACT,
            wait=True,
            tags=scope_tags(AGENT, "Main"),  # the exact agent id the requests carry
        )
        await client.write(alice, "viking://~/memories/preferences/drink.md", DRINK_FACT, wait=True)
        await client.write(
            alice, "viking://~/memories/entities/pet.md", "Alice has a grey cat called Miso.", wait=True
        )
        await client.write(
            Tenant(ACCOUNT, "bob"),
            "viking://~/memories/entities/car.md",
            "Bob drives a red bicycle.",
            wait=True,
        )
        yield client


def question() -> list[common_pb2.ConversationMessage]:
    return [user("hello"), assistant("Hi! How can I help?"), user("which code editor and theme do I use?")]


async def test_memories_recalled_for_their_user_only(ov: OpenVikingClient) -> None:
    async with assembly_stub(SETTINGS, ov) as stub:
        alice = await stub.Assemble(
            assembly_pb2.AssembleRequest(identity=identity("alice", f"new-{RUN}"), messages=question())
        )
        bob = await stub.Assemble(
            assembly_pb2.AssembleRequest(identity=identity("bob", f"new-{RUN}"), messages=question())
        )
    assert not alice.packet.degraded, alice.packet.degraded_reasons
    uris = [m.uri for m in alice.packet.recalled_memories]
    assert any(u.endswith("/notes/editor.md") and "/user/alice/" in u for u in uris), uris
    editor = next(m for m in alice.packet.recalled_memories if m.uri.endswith("editor.md"))
    assert editor.content == EDITOR_FACT and editor.category == "notes"
    assert editor.scope == packet_pb2.MEMORY_SCOPE_AGENT
    # Preferences are part of the stable profile (and so left out of recall).
    assert DRINK_FACT in alice.system_prompt_addition and DRINK_FACT not in bob.system_prompt_addition
    # The injected pair: assistant tool call right after the newest user message, then its result.
    assert list(alice.messages[:3]) == question()
    call, result = alice.messages[3], alice.messages[4]
    assert len(alice.messages) == 5
    tool_call = call.content[0].tool_call
    assert call.role == common_pb2.MESSAGE_ROLE_ASSISTANT and tool_call.name == "memory_recall_auto"
    assert len(tool_call.id) == 9 and tool_call.id.isalnum()
    assert json.loads(tool_call.arguments.json) == {"query": alice.packet.recall_query}
    tr = result.content[0].tool_result
    assert result.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT and tr.tool_call_id == tool_call.id
    payload = json.loads(tr.content[0].text.text)
    assert payload["source"] == "openviking-auto-recall"
    editor_item = f"notes: {EDITOR_FACT} ref={handle_for(editor.uri)}"
    assert editor_item in payload["memories"] and handle_for(editor.uri).startswith("viking://~/memories/")
    assert call.id.startswith("ce-injected-") and result.id.startswith("ce-injected-")
    # Bob never sees Alice's memories.
    assert not bob.packet.degraded, bob.packet.degraded_reasons
    assert all("/user/bob/" in m.uri for m in bob.packet.recalled_memories)
    assert EDITOR_FACT not in "".join(str(m) for m in bob.messages)


async def test_explicit_recall_against_openviking(ov: OpenVikingClient) -> None:
    async with assembly_stub(SETTINGS, ov) as stub:
        reply = await stub.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=identity("alice", ""), query="what pet do I have")
        )
    assert any(m.uri.endswith("/entities/pet.md") for m in reply.memories)
    assert json.loads(reply.tool_result.json)["source"] == "openviking-recall"


async def test_openviking_down_yields_host_messages_degraded() -> None:
    dead = OpenVikingClient(f"http://127.0.0.1:{free_port()}", DevAuth(), retry=RetryPolicy(max_attempts=1))
    async with dead, assembly_stub(SETTINGS, dead) as stub:
        reply = await stub.Assemble(
            assembly_pb2.AssembleRequest(identity=identity("alice", f"down-{RUN}"), messages=question())
        )
    assert reply.packet.degraded and reply.packet.degraded_reasons
    assert list(reply.messages) == question()
    assert not reply.packet.recalled_memories


async def test_recall_off_against_openviking(ov: OpenVikingClient) -> None:
    settings = SETTINGS.model_copy(update={"auto_recall": False})
    async with assembly_stub(settings, ov) as stub:
        reply = await stub.Assemble(
            assembly_pb2.AssembleRequest(identity=identity("alice", f"off-{RUN}"), messages=question())
        )
    assert list(reply.messages) == question() and not reply.packet.recalled_memories
    assert reply.packet.recall_skip_reason == "auto_recall_disabled" and not reply.packet.degraded
