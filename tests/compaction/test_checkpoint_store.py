"""What a compaction's bookkeeping costs OpenViking, against a real one: a checkpoint this process
last read or wrote is updated without a read, and a stale copy never loses another writer's
change (compare-and-swap); a worker polling its stream's first checkpoint reads the stream state
once for its `earlier` summary, not at every poll; a commit's record and its engine summary are
one write after one read of the archive."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from contextengine.v1 import common_pb2

from services.compaction.engine_summary import EngineSummariser
from services.compaction.history import HistorySummariser
from services.compaction.worker import CompactionWorker
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore, new_checkpoint_id, utc_now
from shared.domain.documents import DocumentStore
from shared.domain.finalisation import attach_commit
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import InflightCompaction, StreamState, StreamStateStore
from shared.openviking import DevAuth, OpenVikingClient
from shared.openviking.tenant import Tenant
from tests.compaction.helpers import StreamWriter, conversation
from tests.support.call_log import CallLog
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

TENANT = Tenant(f"ce-cpstore-{uuid.uuid4().hex[:8]}", "erin")
READ = "GET /api/v1/content/read"
MKDIR = "POST /api/v1/fs/mkdir"
WRITE = "POST /api/v1/content/batch-write"


@pytest.fixture
async def logged(openviking: OpenVikingEndpoint) -> AsyncIterator[tuple[OpenVikingClient, CallLog]]:
    log = CallLog()
    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[log]) as client:
        yield client, log


@pytest.fixture
async def other(openviking: OpenVikingEndpoint) -> AsyncIterator[CheckpointStore]:
    """Another replica's store: its writes are unknown to the store under test."""
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield CheckpointStore(DocumentStore(client))


def new_checkpoint(stream_id: str = "") -> CheckpointRecord:
    stream_id = stream_id or uuid.uuid4().hex[:20]
    return CheckpointRecord(
        checkpoint_id=new_checkpoint_id(stream_id), stream_id=stream_id, session_id=f"ov-{stream_id}"
    )


async def created(client: OpenVikingClient) -> tuple[CheckpointStore, CheckpointRecord]:
    """A new checkpoint, created by a store of its own over `client` (which remembers it)."""
    store, record = CheckpointStore(DocumentStore(client)), new_checkpoint()
    assert await store.create(TENANT, record) == record
    return store, record


def set_owner(owner: str) -> Callable[[CheckpointRecord], CheckpointRecord | None]:
    """The lease's shape of change: nothing to write when `owner` holds it already."""

    def take(current: CheckpointRecord) -> CheckpointRecord | None:
        if current.owner == owner:
            return None
        current.owner = owner
        return current

    return take


def add_turn(turn_id: str) -> Callable[[CheckpointRecord], CheckpointRecord | None]:
    def add(current: CheckpointRecord) -> CheckpointRecord | None:
        current.turn_ids.append(turn_id)
        return current

    return add


async def test_updates_of_a_checkpoint_this_process_wrote_cost_one_write_each(
    logged: tuple[OpenVikingClient, CallLog],
) -> None:
    client, log = logged
    store, record = await created(client)
    start = log.mark()
    await store.update(TENANT, record.checkpoint_id, set_owner("a"))
    await store.update(TENANT, record.checkpoint_id, add_turn("t1"))
    read_then = log.mark()
    polled = await store.read(TENANT, record.checkpoint_id)  # a poll always reads
    await store.update(TENANT, record.checkpoint_id, add_turn("t2"))
    assert [str(c) for c in log.calls[start:read_then]] == [WRITE, WRITE]
    assert [str(c) for c in log.calls[read_then:]] == [READ, WRITE]
    assert polled is not None and polled.turn_ids == ["t1"]
    stored = await CheckpointStore(DocumentStore(client)).read(TENANT, record.checkpoint_id)
    assert stored is not None and (stored.owner, stored.turn_ids) == ("a", ["t1", "t2"])


async def test_creating_a_checkpoint_that_exists_returns_it_as_stored_for_one_read(
    logged: tuple[OpenVikingClient, CallLog], other: CheckpointStore
) -> None:
    client, log = logged
    record = new_checkpoint()
    assert await other.create(TENANT, record) == record
    await other.update(TENANT, record.checkpoint_id, set_owner("b"))
    start = log.mark()
    found = await CheckpointStore(DocumentStore(client)).create(TENANT, record)
    assert [str(c) for c in log.calls[start:]] == [READ]
    assert found is not None and found.owner == "b"


async def test_a_change_made_elsewhere_is_kept_when_a_stale_copy_is_updated(
    logged: tuple[OpenVikingClient, CallLog], other: CheckpointStore
) -> None:
    client, log = logged
    store, record = await created(client)
    await other.update(TENANT, record.checkpoint_id, add_turn("elsewhere"))
    start = log.mark()
    await store.update(TENANT, record.checkpoint_id, add_turn("here"))
    assert [str(c) for c in log.calls[start:]] == [WRITE, READ, WRITE]  # refused, read, written
    stored = await other.read(TENANT, record.checkpoint_id)
    assert stored is not None and stored.turn_ids == ["elsewhere", "here"]


async def test_nothing_to_write_is_only_decided_on_a_fresh_read(
    logged: tuple[OpenVikingClient, CallLog], other: CheckpointStore
) -> None:
    """This process holds the lease as it last wrote it; another replica took it over since:
    taking it back must not be skipped on the strength of the remembered copy."""
    store, record = await created(logged[0])
    await store.update(TENANT, record.checkpoint_id, set_owner("a"))
    await other.update(TENANT, record.checkpoint_id, set_owner("b"))
    after = await store.update(TENANT, record.checkpoint_id, set_owner("a"))
    stored = await other.read(TENANT, record.checkpoint_id)
    assert after is not None and after.owner == "a"
    assert stored is not None and stored.owner == "a"


async def test_a_removed_checkpoint_is_not_updated_from_memory(
    logged: tuple[OpenVikingClient, CallLog], other: CheckpointStore
) -> None:
    store, record = await created(logged[0])
    await other.remove(TENANT, record.checkpoint_id)
    assert await store.update(TENANT, record.checkpoint_id, add_turn("late")) is None
    assert await other.read(TENANT, record.checkpoint_id) is None


async def test_a_streams_first_checkpoint_reads_the_stream_state_once_for_its_earlier_summary(
    logged: tuple[OpenVikingClient, CallLog],
) -> None:
    client, log = logged
    documents = DocumentStore(client)
    store, states = CheckpointStore(documents), StreamStateStore(documents)
    history = HistorySummariser(
        store, states, EngineSummariser(client, store, max_tokens=200, encoding="o200k_base"),
        max_tokens=200, encoding="o200k_base",
    )  # fmt: skip
    identity = RequestIdentity(TENANT, "main", f"host-{uuid.uuid4().hex[:6]}", "")
    first, second = new_checkpoint(identity.stream_id), new_checkpoint(identity.stream_id)

    def listed(state: StreamState) -> StreamState:
        state.checkpoint_ids = [first.checkpoint_id, second.checkpoint_id]
        return state

    await states.update(identity, listed)
    assert await store.create(TENANT, second)  # the first one's document is not there (yet)
    polls = []
    for record in (first, first, first, second, second):
        start = log.mark()
        assert (await history.ensure(identity, record)).earlier is None
        polls.append([str(c) for c in log.calls[start:]])
    assert polls[0] == [READ] and polls[1] == polls[2] == []
    # A later checkpoint looks again each time: its predecessor's document may still be created.
    assert polls[3] == polls[4] == [READ, READ]


async def test_a_new_hand_off_is_owned_by_creating_its_checkpoint_leased(
    logged: tuple[OpenVikingClient, CallLog],
) -> None:
    """One read (none stored yet), the creation claim, one write: the owner's lease is in it."""
    client, log = logged
    worker = CompactionWorker(
        client, enable_working_memory=None, phase2_wait_seconds=5.0, summary_max_tokens=200,
        encoding="o200k_base",
    )  # fmt: skip
    identity = RequestIdentity(TENANT, "main", f"host-{uuid.uuid4().hex[:6]}", "")
    entry = InflightCompaction(
        checkpoint_id=new_checkpoint_id(identity.stream_id), session_id="ov-none", started_at=utc_now()
    )
    start = log.mark()
    log.hold_after(3)  # a fourth request would be held: owning must not wait for one
    try:
        owned = await asyncio.wait_for(worker.own(identity, entry), 30)
    finally:
        log.let_go()
        await worker.shutdown()
    assert [str(c) for c in log.calls[start : start + 3]] == [READ, MKDIR, WRITE]
    assert owned.owner == worker.name and owned.lease_until is not None
    stored = await CheckpointStore(DocumentStore(client)).read(TENANT, entry.checkpoint_id)
    assert stored is not None and stored.checkpoint_id == entry.checkpoint_id


async def test_a_commits_record_and_its_engine_summary_are_one_write_after_one_archive_read(
    logged: tuple[OpenVikingClient, CallLog],
) -> None:
    client, log = logged
    who = common_pb2.Identity(
        account_id=TENANT.account_id,
        user_id=TENANT.user_id,
        agent_id="main",
        session_id=f"h-{uuid.uuid4().hex[:6]}",
    )
    writer = StreamWriter(client, who)
    await writer.append(
        conversation(["We ship the Orion API on 2026-03-02.", "Noted: March 2nd, port 8443."])
    )
    session_id = (await writer.state()).active_session
    store = CheckpointStore(DocumentStore(client))
    record = new_checkpoint(writer.identity.stream_id)
    record.session_id = session_id
    await store.create(TENANT, record)
    archive_uri = (await client.commit_session(TENANT, session_id, keep_recent_count=0)).archive_uri
    summariser = EngineSummariser(client, store, max_tokens=200, encoding="o200k_base")
    start = log.mark()
    attached = await attach_commit(
        client, store, TENANT, record.checkpoint_id, archive_uri=archive_uri, task_id="t",
        summary_of=summariser.summary_of,
    )  # fmt: skip
    assert [str(c) for c in log.calls[start:]] == [READ, WRITE]  # the archive, the checkpoint
    assert attached is not None and attached.engine_summary is not None
    assert "Orion" in attached.engine_summary.text and (attached.start_sequence, attached.end_sequence) == (
        0,
        1,
    )
    start = log.mark()
    assert (await summariser.ensure(TENANT, attached)).engine_summary == attached.engine_summary
    assert log.calls[start:] == []  # nothing left to read or write
    stored = await store.read(TENANT, record.checkpoint_id)
    assert stored is not None and stored.engine_summary == attached.engine_summary
