"""CompactionService against the real local OpenViking without an LLM (extraction off)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2

from shared.domain.archives import session_uri
from tests.compaction.helpers import (
    Replica,
    StreamWriter,
    compact_request,
    conversation,
    settings_for,
    start_replica,
    status_of,
)
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

RUN = uuid.uuid4().hex[:8]
ACCOUNT = f"ce-cmp-{RUN}"
COMPLETED = checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED


def identity(session: str, user: str = "carol") -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user, agent_id="main", session_id=session)


@pytest.fixture(scope="module")
async def service(openviking: OpenVikingEndpoint) -> AsyncIterator[Replica]:
    running = await start_replica(settings_for(openviking.base_url))
    try:
        yield running
    finally:
        await running.stop()


async def test_compact_commits_and_returns_the_newest_raw_turns(service: Replica) -> None:
    who = identity(f"host-{uuid.uuid4().hex[:6]}")
    writer = StreamWriter(service.openviking, who)
    await writer.append(conversation([f"line {i} about the orders service" for i in range(10)]))
    first_session = (await writer.state()).active_session

    response = await service.stub.Compact(compact_request(who), timeout=120)

    assert response.ok and response.compacted, response.reason
    cp = response.checkpoint
    assert cp.status == COMPLETED, cp
    assert cp.session_id == first_session
    assert (cp.source_turn_range.start_sequence, cp.source_turn_range.end_sequence) == (0, 9)
    assert cp.archive_index == 1
    assert cp.archive_uri.endswith(f"/sessions/{first_session}/history/archive_001")
    assert cp.summary_uri == cp.archive_uri
    assert cp.host_session_id == who.session_id and cp.agent_id == "main"
    assert list(cp.extracted_memory_uris) == []
    # No LLM: the engine's own summary, then the newest recentRawTurnCount (4) host messages, exactly.
    assert "line 3 about the orders service" in response.summary
    assert response.messages[0].content[0].text.text == f"[Session History Summary]\n{response.summary}"
    assert list(response.messages[1:]) == writer.written[-4:]
    assert response.tokens_after > 0

    state = await writer.state()
    assert state.generation == 1 and state.active_session != first_session
    assert state.turns_since_compaction == 0 and state.inflight == []
    assert state.checkpoint_ids == [cp.checkpoint_id]

    again = await service.stub.Compact(compact_request(who, force=False), timeout=60)
    assert not again.compacted and "nothing to compact" in again.reason

    # New turns land in the new session; the next compaction covers only them.
    await writer.append(conversation(["a new question", "a new answer"], start=10))
    second = await service.stub.Compact(compact_request(who), timeout=120)
    assert second.compacted and second.checkpoint.status == COMPLETED
    assert second.checkpoint.session_id == state.active_session
    assert (
        second.checkpoint.source_turn_range.start_sequence,
        second.checkpoint.source_turn_range.end_sequence,
    ) == (
        10,
        11,
    )
    # The newest summary (the second exchange says nothing to keep: the first checkpoint's), then
    # the raw window, which spans sessions: the newest 4 are 8..11.
    assert second.summary == response.summary
    assert second.messages[0].id.endswith(cp.checkpoint_id)
    assert list(second.messages[1:]) == writer.written[-4:]

    listed = await service.stub.ListCheckpoints(
        compaction_pb2.ListCheckpointsRequest(identity=who, page_size=1), timeout=30
    )
    assert [c.checkpoint_id for c in listed.checkpoints] == [second.checkpoint.checkpoint_id]
    rest = await service.stub.ListCheckpoints(
        compaction_pb2.ListCheckpointsRequest(identity=who, page_size=1, page_token=listed.next_page_token),
        timeout=30,
    )
    assert [c.checkpoint_id for c in rest.checkpoints] == [cp.checkpoint_id]
    assert rest.next_page_token == ""

    got = await service.stub.GetCheckpoint(
        compaction_pb2.GetCheckpointRequest(identity=who, checkpoint_id=cp.checkpoint_id), timeout=30
    )
    assert got.checkpoint == cp


async def test_expand_returns_the_exact_archived_turns(service: Replica) -> None:
    who = identity(f"host-{uuid.uuid4().hex[:6]}")
    writer = StreamWriter(service.openviking, who)
    lines = [
        "The invoice service runs on port 8443.",
        "Noted: invoice service, port 8443.",
        "Deploys happen on Tuesdays.",
        "Tuesdays it is.",
        "The staging database is called orders_stg.",
        "orders_stg noted.",
    ]
    await writer.append(conversation(lines))
    response = await service.stub.Compact(compact_request(who), timeout=120)
    cp = response.checkpoint
    expected = [writer.envelope(i, cp.session_id) for i in range(len(lines))]

    for reference in (cp.checkpoint_id, cp.summary_uri, cp.archive_uri + "/messages.jsonl"):
        expanded = await service.stub.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=reference), timeout=60
        )
        assert [t.turn for t in expanded.turns] == expected, reference
        assert [t.message for t in expanded.turns] == writer.written, "the exact host messages"
        assert expanded.checkpoint_id == cp.checkpoint_id
        assert set(expanded.linked_uris) == {session_uri_of(who, cp.session_id), cp.archive_uri}
        assert cp.archive_uri + "/messages.jsonl" in expanded.readable_uris
        assert all(t.source_uri == cp.archive_uri + "/messages.jsonl" for t in expanded.turns)

    ranked = await service.stub.ExpandMemory(
        compaction_pb2.ExpandMemoryRequest(
            identity=who, summary_or_memory_uri=cp.summary_uri, query="which port does invoice use?", limit=2
        ),
        timeout=60,
    )
    assert len(ranked.turns) == 2
    assert ranked.turns[0].turn == expected[0]
    assert ranked.turns[0].match_score > ranked.turns[1].match_score or ranked.turns[1].turn == expected[1]

    home = cp.summary_uri.replace(f"viking://user/{who.user_id}/", "viking://~/")
    via_home = await service.stub.ExpandMemory(
        compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=home, limit=1), timeout=60
    )
    assert [t.turn for t in via_home.turns] == expected[:1]


def session_uri_of(who: common_pb2.Identity, session_id: str) -> str:
    from shared.openviking import Tenant  # noqa: PLC0415

    return session_uri(Tenant(who.account_id, who.user_id), session_id)


@pytest.mark.parametrize(
    ("reference", "limit", "code"),
    [
        ("", 0, "INVALID_ARGUMENT"),
        ("not a uri", 0, "INVALID_ARGUMENT"),
        ("viking://user/carol/../dave/memories/x.md", 0, "INVALID_ARGUMENT"),
        ("viking://user/carol/memories/x.md", -1, "INVALID_ARGUMENT"),
        ("viking://user/carol/memories/x.md", 51, "NOT_FOUND"),  # a large limit is capped, not refused
        ("viking://user/carol/memories/x\x00.md", 0, "INVALID_ARGUMENT"),
        ("viking://user/dave/memories/preferences/dave/editor.md", 0, "PERMISSION_DENIED"),
        ("viking://user/carol/memories/preferences/carol/unknown.md", 0, "NOT_FOUND"),
        ("viking://~/sessions/ce-0123456789abcdef0123-g0000/history/archive_009", 0, "NOT_FOUND"),
        ("cp-0123456789abcdef0123-1760000000000-abcdef", 0, "NOT_FOUND"),
    ],
)
async def test_expand_rejects_bad_references(service: Replica, reference: str, limit: int, code: str) -> None:
    with pytest.raises(Exception) as caught:
        await service.stub.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(
                identity=identity("host-errors"), summary_or_memory_uri=reference, limit=limit
            ),
            timeout=30,
        )
    assert status_of(caught.value).name == code
    if code == "INVALID_ARGUMENT":
        details = caught.value.details()  # type: ignore[attr-defined]
        assert details.startswith("limit" if limit < 0 else "summary_or_memory_uri"), details
        assert "\x00" not in details


async def test_checkpoint_lookups_validate_their_arguments(service: Replica) -> None:
    who = identity("host-errors")
    for checkpoint_id, code in (("", "INVALID_ARGUMENT"), ("nope", "INVALID_ARGUMENT")):
        with pytest.raises(Exception) as caught:
            await service.stub.GetCheckpoint(
                compaction_pb2.GetCheckpointRequest(identity=who, checkpoint_id=checkpoint_id), timeout=30
            )
        assert status_of(caught.value).name == code
    with pytest.raises(Exception) as unknown:
        await service.stub.GetCheckpoint(
            compaction_pb2.GetCheckpointRequest(
                identity=who, checkpoint_id="cp-0123456789abcdef0123-1760000000000-abcdef"
            ),
            timeout=30,
        )
    assert status_of(unknown.value).name == "NOT_FOUND"
    with pytest.raises(Exception) as bad_page:
        await service.stub.ListCheckpoints(
            compaction_pb2.ListCheckpointsRequest(identity=who, page_token="x"), timeout=30
        )
    assert status_of(bad_page.value).name == "INVALID_ARGUMENT"
    empty = await service.stub.ListCheckpoints(
        compaction_pb2.ListCheckpointsRequest(identity=who), timeout=30
    )
    assert list(empty.checkpoints) == []
    nothing = await service.stub.Compact(compact_request(who, force=True), timeout=60)
    assert not nothing.compacted


async def test_compact_without_force_waits_for_a_threshold(service: Replica) -> None:
    """The proto's contract (issue 32 item 5): `force=false` below every threshold compacts
    nothing; the host's own token count reaching the budget threshold is one."""
    who = identity(f"host-{uuid.uuid4().hex[:6]}")
    writer = StreamWriter(service.openviking, who)
    await writer.append(conversation(["a short question", "a short answer"]))
    before = await writer.state()

    below = await service.stub.Compact(compact_request(who, force=False), timeout=60)

    assert (below.ok, below.compacted) == (True, False) and "threshold" in below.reason, below
    assert await writer.state() == before  # nothing handed off, no checkpoint
    request = compact_request(who, force=False)
    request.token_budget, request.current_token_count = 1000, 800  # over 0.75 of the budget
    reached = await service.stub.Compact(request, timeout=120)
    assert reached.compacted and reached.checkpoint.status == COMPLETED, reached
    assert (await writer.state()).checkpoint_ids == [reached.checkpoint.checkpoint_id]
