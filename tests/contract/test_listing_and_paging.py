"""ListCheckpoints across a user's sessions, and ExpandMemory's capped limit and paging."""

from __future__ import annotations

import uuid

import pytest
from contextengine.v1 import capture_pb2, checkpoint_pb2, common_pb2, compaction_pb2

from shared.domain.conversation import text_message
from tests.contract.conftest import ENGINE_SETTINGS
from tests.e2e.host import Stubs

pytestmark = pytest.mark.stack

ACCOUNT = f"ce-list-{uuid.uuid4().hex[:8]}"
Role = common_pb2.MessageRole


def who(user: str, session: str, agent: str = "main") -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user, agent_id=agent, session_id=session)


async def converse_and_compact(stubs: Stubs, identity: common_pb2.Identity, turns: int) -> str:
    roles = (Role.MESSAGE_ROLE_USER, Role.MESSAGE_ROLE_ASSISTANT)
    messages = [text_message(roles[i % 2], f"{identity.session_id} line {i}") for i in range(turns)]
    await stubs.capture.AfterTurn(
        capture_pb2.AfterTurnRequest(identity=identity, messages=messages), timeout=120
    )
    compacted = await stubs.compaction.Compact(
        compaction_pb2.CompactRequest(
            identity=identity, force=True, trigger=checkpoint_pb2.COMPACTION_TRIGGER_HOST_REQUEST
        ),
        timeout=300,
    )
    assert compacted.compacted, compacted.reason
    return compacted.checkpoint.checkpoint_id


async def listed(stubs: Stubs, identity: common_pb2.Identity, page_size: int = 0) -> list[str]:
    ids: list[str] = []
    token = ""
    while True:
        page = await stubs.compaction.ListCheckpoints(
            compaction_pb2.ListCheckpointsRequest(identity=identity, page_size=page_size, page_token=token),
            timeout=120,
        )
        ids += [c.checkpoint_id for c in page.checkpoints]
        token = page.next_page_token
        if not token:
            return ids


async def test_list_checkpoints_without_a_session_spans_the_users_sessions(contract_engine: Stubs) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    first = await converse_and_compact(contract_engine, who(user, "s-one"), 2)
    second = await converse_and_compact(contract_engine, who(user, "s-two"), 2)
    other_agent = await converse_and_compact(contract_engine, who(user, "s-two", agent="helper"), 2)
    await converse_and_compact(contract_engine, who(f"{user}-else", "s-one"), 2)  # another user's

    everything = await listed(contract_engine, who(user, "", agent=""), page_size=1)
    assert everything == [other_agent, second, first], "the user's checkpoints, newest first"
    assert await listed(contract_engine, who(user, "", agent="main")) == [second, first]
    assert await listed(contract_engine, who(user, "s-one")) == [first]


async def test_expand_caps_a_large_limit_and_pages_through_long_archives(contract_engine: Stubs) -> None:
    identity = who(f"u-{uuid.uuid4().hex[:8]}", "long")
    checkpoint_id = await converse_and_compact(contract_engine, identity, 40)
    maximum = int(str(ENGINE_SETTINGS["memoryExpandMaxResults"]))

    first = await contract_engine.compaction.ExpandMemory(
        compaction_pb2.ExpandMemoryRequest(
            identity=identity, summary_or_memory_uri=checkpoint_id, limit=10_000
        ),
        timeout=120,
    )
    assert len(first.turns) == maximum and first.next_page_token
    rest = await contract_engine.compaction.ExpandMemory(
        compaction_pb2.ExpandMemoryRequest(
            identity=identity, summary_or_memory_uri=checkpoint_id, page_token=first.next_page_token
        ),
        timeout=120,
    )
    assert not rest.next_page_token
    sequences = [t.turn.sequence for t in (*first.turns, *rest.turns)]
    assert sequences == list(range(40))
