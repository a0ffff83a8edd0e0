"""Lossless recall through the public gRPC API, with no LLM and no StoreMemory: a fact said only in
conversation is recalled in a later session, dated, and expands back to the exact original turn."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from contextengine.v1 import assembly_pb2, capture_pb2, common_pb2

from shared.domain.conversation import text_message
from shared.domain.recall_handles import handle_for
from shared.domain.turn_index import is_turn_uri
from tests.e2e.host import (
    HostSession,
    Stubs,
    engine,
    envelope_text,
    new_user_id,
    recall_pair,
    recalled_tool_result,
)
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

ACCOUNT = f"e2e-lossless-{uuid.uuid4().hex[:8]}"
SAID_AT = datetime(2026, 3, 4, 14, 5, tzinfo=UTC)
FACT = "My sister Priya just moved to Lisbon for a job at a small fintech, the flat is tiny."
CHATTER = [
    ("Can you help me plan the sprint retro agenda?", "Sure: wins, misses, one experiment."),
    ("What is a good way to debug a flaky integration test?", "Re-run it with the seed pinned."),
    ("Any tips for the quarterly planning doc?", "Start from the goals, then the risks."),
]
INDEX_SECONDS = 10.0
"""The turn index is written asynchronously; OpenViking makes a write findable within ~0.3 s."""


@pytest.fixture(scope="module")
async def stubs(openviking: OpenVikingEndpoint) -> AsyncIterator[Stubs]:
    async with engine(baseUrl=openviking.base_url, timeoutMs=60_000, recallTimeoutMs=20_000) as connected:
        yield connected


async def say(host: HostSession, user_text: str, answer: str, when: datetime) -> None:
    """One exchange with the host's timestamps, captured through AfterTurn."""
    before = len(host.transcript)
    host.transcript += [
        text_message(common_pb2.MESSAGE_ROLE_USER, user_text, f"{host.session}-u{before}", when),
        text_message(common_pb2.MESSAGE_ROLE_ASSISTANT, answer, f"{host.session}-a{before}", when),
    ]
    await host.stubs.capture.AfterTurn(
        capture_pb2.AfterTurnRequest(
            identity=host.identity, messages=host.transcript, pre_prompt_message_count=before
        ),
        timeout=60,
    )


async def assemble_until(host: HostSession, prompt: str, needle: str) -> assembly_pb2.AssembleResponse:
    """Assemble until the recall pair carries `needle` (bounded by the index's write latency)."""
    deadline = time.monotonic() + INDEX_SECONDS
    while True:
        response = await host.assemble(prompt, token_budget=2000)
        if recall_pair(list(response.messages)) and needle in str(
            recalled_tool_result(list(response.messages))
        ):
            return response
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} not recalled: {response.packet}")
        await asyncio.sleep(0.3)


async def test_fact_said_only_in_conversation_is_recalled_dated_and_expands_exactly(stubs: Stubs) -> None:
    user = new_user_id("lossless")
    first = HostSession(stubs, ACCOUNT, user, session=f"s-{uuid.uuid4().hex[:6]}")
    await say(first, *CHATTER[0], SAID_AT.replace(hour=13))
    await say(first, FACT, "Congratulations to Priya, Lisbon is lovely.", SAID_AT)
    for text, answer in CHATTER[1:]:
        await say(first, text, answer, SAID_AT.replace(hour=15))
    compacted = await first.compact()
    assert compacted.compacted, compacted

    later = HostSession(stubs, ACCOUNT, user, session=f"s-{uuid.uuid4().hex[:6]}")
    response = await assemble_until(later, "Which city does my sibling live in these days?", "Lisbon")
    assert not response.packet.degraded, response.packet.degraded_reasons
    items = recalled_tool_result(list(response.messages))["memories"]
    assert isinstance(items, list)
    item = next(i for i in items if "Lisbon" in i)
    # Said once which day, then what was said, then the handle memory_expand takes.
    assert item.startswith("2026-03-04 user: ") and FACT in item and item.count("2026-03-04") == 1
    handle = item.rsplit(" ref=", 1)[1]
    recalled = next(m for m in response.packet.recalled_memories if handle_for(m.uri) == handle)
    assert (recalled.kind, recalled.said_at) == ("turn", "2026-03-04 14:05") and is_turn_uri(recalled.uri)
    assert response.packet.tokens.used <= 2000

    expanded = await later.expand(handle)
    turns = [t.turn for t in expanded.turns]
    assert [t.host_message_id for t in turns] == [m.id for m in first.transcript[2:4]]
    assert envelope_text(turns[0]) == FACT
    assert turns[0].timestamp.ToDatetime(tzinfo=UTC) == SAID_AT


async def test_continuing_session_recalls_by_the_prompt_not_the_recent_turns(stubs: Stubs) -> None:
    """The question, not the last five user turns, drives recall: a fact from an earlier session is
    found at the end of a long, unrelated continuing session."""
    user = new_user_id("continuing")
    earlier = HostSession(stubs, ACCOUNT, user, session=f"s-{uuid.uuid4().hex[:6]}")
    await say(earlier, "The locker combination at the gym is 4821, Henrik set it.", "Noted.", SAID_AT)
    await earlier.compact()
    ongoing = HostSession(stubs, ACCOUNT, user, session=f"s-{uuid.uuid4().hex[:6]}")
    for index in range(6):
        text, answer = CHATTER[index % len(CHATTER)]
        await say(ongoing, f"{text} (take {index})", answer, SAID_AT.replace(day=10, hour=index + 8))
    response = await assemble_until(ongoing, "What are the digits to open my gym locker?", "4821")
    assert response.packet.recall_query == "What are the digits to open my gym locker?"
