"""Compaction makes every exchange of the session findable before archiving it, even when
capture's own index writes never happened (here: turns appended as capture does, no index)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from contextengine.v1 import common_pb2, compaction_pb2

from shared.domain.turn_index import TURN_INDEX_ROOT, document_texts, session_index_uri
from tests.compaction.helpers import (
    Replica,
    StreamWriter,
    compact_request,
    conversation,
    settings_for,
    start_replica,
)
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

ACCOUNT = f"ce-idx-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
async def service(openviking: OpenVikingEndpoint) -> AsyncIterator[Replica]:
    running = await start_replica(settings_for(openviking.base_url))
    try:
        yield running
    finally:
        await running.stop()


async def test_compaction_indexes_the_missing_exchanges_and_they_expand_exactly(service: Replica) -> None:
    who = common_pb2.Identity(account_id=ACCOUNT, user_id="dana", agent_id="main", session_id="h-1")
    writer = StreamWriter(service.openviking, who)
    lines = [f"question {i} about the zebra-{i} rollout" if i % 2 == 0 else f"answer {i}" for i in range(6)]
    await writer.append(conversation(lines))
    session_id = (await writer.state()).active_session
    tenant = writer.identity.tenant

    response = await service.stub.Compact(compact_request(who, force=True), timeout=120)
    assert response.compacted, response.reason

    listing = await service.openviking.ls(tenant, session_index_uri(session_id))
    names = sorted(entry.uri.rsplit("/", 1)[-1] for entry in listing.entries if not entry.is_dir)
    assert names == ["0000000.md", "0000002.md", "0000004.md"]  # one document per exchange
    body = await service.openviking.read(tenant, f"{TURN_INDEX_ROOT}/{session_id}/0000002.md")
    assert document_texts(body) == ["question 2 about the zebra-2 rollout", "answer 3"]

    expanded = await service.stub.ExpandMemory(
        compaction_pb2.ExpandMemoryRequest(
            identity=who, summary_or_memory_uri=f"{TURN_INDEX_ROOT}/{session_id}/0000002.md"
        ),
        timeout=60,
    )
    assert [t.turn.sequence for t in expanded.turns] == [2, 3]
    assert [t.turn for t in expanded.turns] == [
        writer.envelope(2, session_id),
        writer.envelope(3, session_id),
    ]

    # A second compaction of the next session writes nothing twice (deterministic URIs).
    await writer.append(conversation(["one more question about zebra", "and its answer"], start=6))
    again = await service.stub.Compact(compact_request(who, force=True), timeout=120)
    assert again.compacted, again.reason
    listing = await service.openviking.ls(tenant, session_index_uri(session_id))
    assert len([e for e in listing.entries if not e.is_dir]) == 3
