"""Scopes mean what they say: USER memories for every agent of the user, AGENT memories for the
exact agent only (look-alike ids never collide), categories file memories where the profile and
ranking look. Properties of the pure model, then the real services on the real OpenViking."""

from __future__ import annotations

import uuid

import grpc
import pytest
from contextengine.v1 import assembly_pb2, capture_pb2, common_pb2, packet_pb2
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.memory_scope import AGENT, USER, scope_tags, visible_to
from tests.e2e.host import Stubs

AGENT_IDS = st.from_regex(r"\A[A-Za-z0-9_.@-]{1,40}\Z")
LOOK_ALIKES = ("ops@x", "ops_x", "OPS@x", "ops.x", "Ops@X")
"""Ids that differ only by case or by characters a tag-safe rewrite would merge."""


def as_openviking_stores(tags: list[str]) -> list[str]:
    """OpenViking lower-cases the tags it stores."""
    return [tag.lower() for tag in tags]


@given(AGENT_IDS, AGENT_IDS)
def test_agent_memories_are_visible_to_exactly_their_agent(writer: str, reader: str) -> None:
    tags = as_openviking_stores(scope_tags(AGENT, writer))
    assert visible_to(tags, writer) == AGENT
    assert visible_to(tags, reader) == (AGENT if reader == writer else None)
    assert visible_to(as_openviking_stores(scope_tags(USER, writer)), reader) == USER


def test_untagged_memories_are_the_users_and_a_broken_owner_is_no_ones() -> None:
    assert visible_to(["memory_type=preferences"], "main") == USER
    assert visible_to(["ce_scope=agent"], "main") is None


ACCOUNT = f"ce-scope-{uuid.uuid4().hex[:8]}"


def who(user: str, agent: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user, agent_id=agent, session_id="scope-s")


async def store(stubs: Stubs, identity: common_pb2.Identity, text: str, **fields: object) -> str:
    stored = await stubs.capture.StoreMemory(
        capture_pb2.StoreMemoryRequest(identity=identity, text=text, **fields),
        timeout=120,  # type: ignore[arg-type]
    )
    assert stored.created, stored
    return stored.uri


async def recalled(stubs: Stubs, identity: common_pb2.Identity, query: str) -> dict[str, int]:
    response = await stubs.assembly.RecallMemories(
        assembly_pb2.RecallMemoriesRequest(identity=identity, query=query, limit=20), timeout=120
    )
    assert not response.degraded
    return {m.uri: m.scope for m in response.memories}


@pytest.mark.stack
async def test_user_and_agent_scopes_across_look_alike_agents(contract_engine: Stubs) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    shared_uri = await store(
        contract_engine, who(user, LOOK_ALIKES[0]), "The team's staging cluster is called bluefin-staging"
    )
    text = "My private deploy token rotation happens every Friday at noon"
    own = {agent: await store(contract_engine, who(user, agent), text, scope=packet_pb2.MEMORY_SCOPE_AGENT)
           for agent in LOOK_ALIKES}  # fmt: skip
    assert len(set(own.values())) == len(LOOK_ALIKES), "each agent's memory is its own file"

    for agent in (*LOOK_ALIKES, "main"):
        seen = await recalled(contract_engine, who(user, agent), "staging cluster and deploy token rotation")
        assert seen.get(shared_uri) == packet_pb2.MEMORY_SCOPE_USER, (agent, seen)
        agent_scoped = {uri for uri, scope in seen.items() if scope == packet_pb2.MEMORY_SCOPE_AGENT}
        assert agent_scoped == ({own[agent]} if agent in own else set()), (agent, seen)
        assert not (set(own.values()) - {own.get(agent)}) & set(seen), f"{agent} sees another agent's memory"

    # Another agent can neither forget it by URI nor by query; the owner can.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await contract_engine.capture.ForgetMemory(
            capture_pb2.ForgetMemoryRequest(identity=who(user, "ops_x"), uri=own["ops@x"]), timeout=60
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    by_query = await contract_engine.capture.ForgetMemory(
        capture_pb2.ForgetMemoryRequest(identity=who(user, "main"), query=text), timeout=60
    )
    assert not by_query.deleted_uris and not by_query.candidates
    assert own["ops@x"] in await recalled(contract_engine, who(user, "ops@x"), text)
    forgot = await contract_engine.capture.ForgetMemory(
        capture_pb2.ForgetMemoryRequest(identity=who(user, "ops@x"), uri=own["ops@x"]), timeout=60
    )
    assert list(forgot.deleted_uris) == [own["ops@x"]]


@pytest.mark.stack
async def test_a_preferences_memory_is_a_preference(contract_engine: Stubs) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    identity = who(user, "main")
    uri = await store(contract_engine, identity, "I prefer oat milk in my coffee", category="preferences")
    assert f"/user/{user}/memories/preferences/" in uri
    memories = await contract_engine.assembly.RecallMemories(
        assembly_pb2.RecallMemoriesRequest(identity=identity, query="what do I prefer in coffee?"),
        timeout=120,
    )
    assert [m.category for m in memories.memories if m.uri == uri] == ["preferences"]
    prompt = "Do you remember how I take my coffee?"
    assembled = await contract_engine.assembly.Assemble(
        assembly_pb2.AssembleRequest(
            identity=identity,
            prompt=prompt,
            messages=[
                common_pb2.ConversationMessage(
                    role=common_pb2.MESSAGE_ROLE_USER,
                    content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=prompt))],
                )
            ],
        ),
        timeout=120,
    )
    assert any("oat milk" in block for block in assembled.packet.profile_blocks), (
        assembled.packet.profile_blocks
    )
