"""The client against the real OpenViking 0.5.2 (dev mode, no LLM, extraction off)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from shared.errors import BackendConflict, BackendInvalidArgument, BackendNotFound
from shared.openviking import DevAuth, NewMessage, OpenVikingClient, Tenant, TextPart, ToolPart
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

RUN = uuid.uuid4().hex[:8]
TENANT = Tenant(f"ce-client-{RUN}", "alice")


@pytest.fixture
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield client


def _session_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


async def test_health_and_readiness(ov: OpenVikingClient) -> None:
    health = await ov.health()
    assert health.healthy and health.version == "0.5.2" and health.auth_mode == "dev"
    assert (await ov.ready()).ready
    assert (await ov.system_status(TENANT)).user == TENANT.user_id


async def test_messages_round_trip_their_ids_through_context(ov: OpenVikingClient) -> None:
    session_id = _session_id("roundtrip")
    created = await ov.create_session(TENANT, session_id, auto_commit_policy=None)
    assert created.session_id == session_id
    with pytest.raises(BackendConflict) as conflict:
        await ov.create_session(TENANT, session_id)
    assert (conflict.value.http_status, conflict.value.code) == (409, "ALREADY_EXISTS")

    first = NewMessage(
        role="user",
        content="please list the files",
        created_at="2020-01-02T03:04:05Z",
        turn_id="turn-1",
        message_kind="user_query",
        source_message_ids=("host-m1",),
    )
    added = await ov.add_message(TENANT, session_id, first)
    assert added.message_count == 1
    step = NewMessage(
        role="assistant",
        parts=(
            TextPart(text="listing"),
            ToolPart(
                tool_id="call-1",
                tool_name="ls",
                tool_input={"path": "/tmp", "all": True},
                tool_output="a.txt b.txt",
                tool_status="completed",
            ),
        ),
        turn_id="turn-1",
        message_kind="assistant_step",
        source_message_ids=("host-m2", "host-m3"),
    )
    tail = [
        NewMessage(
            role="user", content=f"message {i}", turn_id=f"turn-{i}", source_message_ids=(f"host-b{i}",)
        )
        for i in range(120)
    ]
    batch = await ov.add_messages(TENANT, session_id, [step, *tail])
    assert (batch.added, batch.message_count) == (121, 122)

    context = await ov.get_session_context(TENANT, session_id)
    assert len(context.messages) == 122
    got_first, got_step = context.messages[0], context.messages[1]
    assert (got_first.turn_id, got_first.message_kind, got_first.created_at) == (
        "turn-1",
        "user_query",
        "2020-01-02T03:04:05Z",
    )
    assert got_first.source_message_ids == ["host-m1"]
    assert got_first.parts == [TextPart(text="please list the files")]
    assert got_step.source_message_ids == ["host-m2", "host-m3"]
    tool = got_step.parts[1]
    assert isinstance(tool, ToolPart)
    assert (tool.tool_id, tool.tool_input, tool.tool_output) == (
        "call-1",
        {"path": "/tmp", "all": True},
        "a.txt b.txt",
    )
    assert context.messages[-1].source_message_ids == ["host-b119"]

    info = await ov.get_session(TENANT, session_id)
    assert (info.message_count, info.total_message_count, info.commit_count) == (122, 122, 0)
    assert info.pending_tokens > 0
    assert session_id in {s.session_id for s in await ov.list_sessions(TENANT)}
    await ov.delete_session(TENANT, session_id)
    with pytest.raises(BackendNotFound):
        await ov.get_session(TENANT, session_id)


async def test_commit_completes_and_archive_files_are_readable(ov: OpenVikingClient) -> None:
    session_id = _session_id("commit")
    messages = [NewMessage(role="user", content=f"fact {i}", source_message_ids=(f"h{i}",)) for i in range(5)]
    await ov.add_messages(TENANT, session_id, messages)

    commit = await ov.commit_session(TENANT, session_id, keep_recent_count=2)
    assert commit.status == "accepted" and commit.task_id and commit.archive_uri
    assert commit.archive_id == "archive_001"
    task = await ov.wait_for_task(TENANT, commit.task_id, time.monotonic() + 30)
    assert task.status == "completed"
    assert task.archive_uri == commit.archive_uri
    assert task.memory_diff_uri is None  # extraction is off
    listed = await ov.list_tasks(TENANT, resource_id=session_id, task_type="session_commit")
    assert commit.task_id in {t.task_id for t in listed}

    meta = await ov.read_archive_meta(TENANT, commit.archive_uri)
    assert meta is not None
    assert len(meta.phase1.archived_message_ids) == 3
    assert len(meta.phase1.retained_message_ids) == 2
    done = await ov.read_archive_done(TENANT, commit.archive_uri)
    assert done is not None and done.starting_message_id == meta.phase1.archived_message_ids[0]
    assert await ov.read_archive_failure(TENANT, commit.archive_uri) is None
    assert await ov.read_memory_diff(TENANT, commit.archive_uri) is None

    archive = await ov.get_session_archive(TENANT, session_id, "archive_001")
    assert [m.source_message_ids for m in archive.messages] == [["h0"], ["h1"], ["h2"]]
    context = await ov.get_session_context(TENANT, session_id)
    assert [m.source_message_ids for m in context.messages] == [["h3"], ["h4"]]

    skipped = await ov.commit_session(TENANT, session_id, keep_recent_count=5)
    assert (skipped.status, skipped.task_id, skipped.reason) == ("skipped", None, "all_within_keep_window")
    info = await ov.get_session(TENANT, session_id)
    assert info.commit_count == 1


async def test_written_memory_is_found_then_forgotten(ov: OpenVikingClient) -> None:
    uri = f"viking://~/memories/notes/tea-{RUN}.md"
    written = await ov.write(
        TENANT, uri, "The user drinks jasmine green tea every morning.", wait=True, tags=["Src_Session=S-1"]
    )
    assert written.uri == f"viking://user/{TENANT.user_id}/memories/notes/tea-{RUN}.md"
    found = await ov.find(
        TENANT, "what tea does the user drink", target_uri="viking://~/memories", level=2, limit=5
    )
    hit = next(h for h in found.memories if h.uri == written.uri)
    assert hit.level == 2 and hit.score > 0.3
    assert hit.tags == ["src_session=s-1"]  # lower-cased by OpenViking

    await ov.set_tags(TENANT, written.uri, ["kind=note"], mode="append")
    assert set((await ov.attrs(TENANT, written.uri)).tags) == {"src_session=s-1", "kind=note"}
    assert await ov.read(TENANT, written.uri) == "The user drinks jasmine green tea every morning."
    listing = await ov.ls(TENANT, "viking://~/memories/notes")
    assert written.uri in {e.uri for e in listing.entries}

    removed = await ov.rm(TENANT, written.uri, wait=True)
    assert removed.estimated_deleted_count == 1
    again = await ov.find(TENANT, "what tea does the user drink", target_uri="viking://~/memories", level=2)
    assert written.uri not in {h.uri for h in again.memories}
    with pytest.raises(BackendNotFound):
        await ov.read(TENANT, written.uri)


async def test_missing_session_maps_to_not_found(ov: OpenVikingClient) -> None:
    missing = _session_id("missing")
    with pytest.raises(BackendNotFound) as raised:
        await ov.get_session(TENANT, missing)
    assert (raised.value.http_status, raised.value.code) == (404, "NOT_FOUND")
    assert missing in raised.value.message
    with pytest.raises(BackendNotFound):
        await ov.get_session_context(TENANT, missing)
    with pytest.raises(BackendNotFound):
        await ov.commit_session(TENANT, missing)
    with pytest.raises(BackendNotFound):
        await ov.get_task(TENANT, uuid.uuid4().hex)


async def test_bad_request_maps_to_invalid_argument(ov: OpenVikingClient) -> None:
    with pytest.raises(BackendInvalidArgument) as raised:
        await ov.find(TENANT, "anything", limit=0)
    assert (raised.value.http_status, raised.value.code) == (400, "INVALID_ARGUMENT")
    assert "limit" in raised.value.message
    with pytest.raises(BackendInvalidArgument):
        await ov.get_session_context(TENANT, _session_id("neg"), token_budget=-1)
