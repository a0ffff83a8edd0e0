"""Hand-offs are owned to the end by whichever compaction replica is there (finding 1 and 4).

Each test leaves OpenViking in a state a dying caller, replica or OpenViking itself leaves
behind, then checks that a live replica brings the checkpoint to COMPLETED with its archive:
- the hand-off recorded in the stream state, no checkpoint document (capture's nudge lost);
- archived by OpenViking but not recorded (the owner died between commit and record);
- the owner's lease still held by a dead replica: the sweep takes over once it expires,
  without any further call;
- a synchronous Compact whose caller gives up mid-way;
- OpenViking failing the owner's checkpoint writes for a moment (its lease renewal included).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import timedelta

import pytest
from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2

from services.compaction import worker
from services.compaction.worker import RESUME_BOUND_SECONDS, new_record
from shared.domain import document_slots
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore, new_checkpoint_id, utc_now
from shared.domain.documents import DocumentStore
from shared.domain.handoff import hand_off
from shared.domain.stream_state import InflightCompaction, StreamState, StreamStateStore
from shared.openviking import DevAuth, OpenVikingClient
from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.openviking.settings import RetryPolicy
from tests.compaction.helpers import (
    Replica,
    StreamWriter,
    compact_request,
    conversation,
    replica,
    settings_for,
    settled,
)
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

RUN = uuid.uuid4().hex[:8]
ACCOUNT = f"ce-handoff-{RUN}"
COMPLETED = checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED
LINES = ["Deploy the API on Monday.", "Noted: Monday.", "Use port 8443.", "Port 8443 it is."]


def identity() -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=ACCOUNT, user_id="dana", agent_id="main", session_id=f"host-{uuid.uuid4().hex[:6]}"
    )


async def recorded_hand_off(writer: StreamWriter) -> InflightCompaction:
    """What capture records when a trigger fires: the hand-off, in the stream state only."""
    checkpoint_id = new_checkpoint_id(writer.identity.stream_id)
    states = StreamStateStore(DocumentStore(writer._ov))

    def record(state: StreamState) -> StreamState | None:
        changed = hand_off(
            state, checkpoint_id, now=utc_now(), trigger=checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
        )
        return changed if isinstance(changed, StreamState) else None

    state, written = await states.update(writer.identity, record)
    assert written
    return state.inflight[-1]


async def committed_hand_off(
    service: Replica,
) -> tuple[StreamWriter, InflightCompaction, checkpoint_pb2.CompactCheckpoint]:
    """A new stream's turns handed off the way capture does, owned by `service` to COMPLETED."""
    who = identity()
    writer = StreamWriter(service.openviking, who)
    await writer.append(conversation(LINES))
    entry = await recorded_hand_off(writer)
    cp = await settled(service.stub, who, entry.checkpoint_id, within=60)
    assert_committed(cp, entry.session_id)
    return writer, entry, cp


def assert_committed(cp: checkpoint_pb2.CompactCheckpoint, session_id: str) -> None:
    assert cp.status == COMPLETED, cp
    assert cp.session_id == session_id and cp.archive_uri.endswith("/history/archive_001"), cp
    assert (cp.source_turn_range.start_sequence, cp.source_turn_range.end_sequence) == (0, len(LINES) - 1)


async def test_hand_off_without_a_checkpoint_document_is_owned_and_committed(
    openviking: OpenVikingEndpoint,
) -> None:
    async with replica(settings_for(openviking.base_url)) as service:
        writer, _, _ = await committed_hand_off(service)
        # the owner drops the hand-off from the stream in the write after the COMPLETED one
        give_up = time.monotonic() + 10
        state = await writer.state()
        while time.monotonic() < give_up:
            state = await writer.state()
            if not state.inflight:
                break
            await asyncio.sleep(0.1)
        assert state.inflight == []


async def test_archived_but_unrecorded_commit_completes_with_its_archive(
    openviking: OpenVikingEndpoint,
) -> None:
    """Finding 1/4: OpenViking archived the session, the owner died before recording it. The
    checkpoint sat PENDING for minutes, or became FAILED with no archive_uri."""
    async with replica(settings_for(openviking.base_url)) as service:
        who = identity()
        writer = StreamWriter(service.openviking, who)
        await writer.append(conversation(LINES))
        entry = await recorded_hand_off(writer)
        tenant = writer.identity.tenant
        store = CheckpointStore(DocumentStore(service.openviking))
        dead = new_record(writer.identity, entry)
        dead.owner, dead.lease_until = "a-dead-replica", utc_now() - timedelta(seconds=1)
        await store.create(tenant, dead)
        committed = await service.openviking.commit_session(tenant, entry.session_id, keep_recent_count=0)
        assert committed.archive_uri  # ... and the owner died here
        started = time.monotonic()
        cp = await settled(service.stub, who, entry.checkpoint_id, within=RESUME_BOUND_SECONDS)
        assert_committed(cp, entry.session_id)
        assert cp.archive_uri == committed.archive_uri.rstrip("/")
        assert time.monotonic() - started < RESUME_BOUND_SECONDS


async def test_the_sweep_takes_over_from_a_dead_owner_without_any_call(
    openviking: OpenVikingEndpoint,
) -> None:
    async with replica(settings_for(openviking.base_url)) as service:
        who = identity()
        writer = StreamWriter(service.openviking, who)
        await writer.append(conversation(LINES))
        entry = await recorded_hand_off(writer)
        tenant = writer.identity.tenant
        store = CheckpointStore(DocumentStore(service.openviking))
        dead = new_record(writer.identity, entry)
        dead.owner, dead.lease_until = "a-dead-replica", utc_now() + timedelta(seconds=3)
        await store.create(tenant, dead)
        seen = await service.stub.GetCheckpoint(
            compaction_pb2.GetCheckpointRequest(identity=who, checkpoint_id=entry.checkpoint_id), timeout=30
        )
        assert seen.checkpoint.status == checkpoint_pb2.CHECKPOINT_STATUS_PENDING  # leased: left alone
        give_up = time.monotonic() + RESUME_BOUND_SECONDS + 10
        record: CheckpointRecord | None = None
        while time.monotonic() < give_up:
            record = await store.read(tenant, entry.checkpoint_id)
            if record is not None and record.status == COMPLETED:
                break
            await asyncio.sleep(0.5)
        assert record is not None and record.status == COMPLETED, record
        assert record.archive_uri and record.owner == ""


async def test_synchronous_compact_whose_caller_gives_up_still_completes(
    openviking: OpenVikingEndpoint,
) -> None:
    async with replica(settings_for(openviking.base_url)) as service:
        who = identity()
        writer = StreamWriter(service.openviking, who)
        await writer.append(conversation(LINES))
        call = service.stub.Compact(compact_request(who), timeout=60)
        give_up = time.monotonic() + 10
        while not (await writer.state()).checkpoint_ids:  # handed off: the caller gives up now
            assert time.monotonic() < give_up
            await asyncio.sleep(0.02)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        give_up = time.monotonic() + 10
        while not (state := await writer.state()).checkpoint_ids:
            assert time.monotonic() < give_up
            await asyncio.sleep(0.1)
        cp = await settled(service.stub, who, state.checkpoint_ids[-1], within=60)
        assert_committed(cp, state.sessions[0])


async def test_a_nudge_owns_hand_offs_but_never_starts_a_compaction(openviking: OpenVikingEndpoint) -> None:
    async with replica(settings_for(openviking.base_url)) as service:
        who = identity()
        writer = StreamWriter(service.openviking, who)
        await writer.append(conversation(LINES))
        nudge = compaction_pb2.CompactRequest(identity=who, background=True, resume_only=True)
        idle = await service.stub.Compact(nudge, timeout=30)
        assert not idle.compacted and (await writer.state()).checkpoint_ids == []
        entry = await recorded_hand_off(writer)
        owned = await service.stub.Compact(nudge, timeout=30)
        assert owned.compacted and owned.checkpoint.checkpoint_id == entry.checkpoint_id
        assert_committed(await settled(service.stub, who, entry.checkpoint_id, within=60), entry.session_id)
        assert (await writer.state()).checkpoint_ids == [entry.checkpoint_id]


class LeaseRenewalsDown:
    """HTTP middleware: once armed, the next `attempts` lease renewals (checkpoint writes that
    change nothing but `lease_until`) are answered 503 without reaching OpenViking, retries
    included."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        self.armed = False
        self._last: dict[str, dict[str, object]] = {}

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        batch = request.json_body() if request.path.endswith("/batch-write") else {}
        for op in batch.get("operations", []):
            if "/checkpoints/" not in op["uri"]:
                continue
            content = {k: v for k, v in json.loads(op["content"]).items() if k != "lease_until"}
            renewal = self._last.get(op["uri"]) == content
            if renewal and self.armed and self.attempts > 0:
                self.attempts -= 1
                body = {"status": "error", "error": {"code": "UNAVAILABLE", "message": "restarting"}}
                return HttpResponse(503, "Service Unavailable", json.dumps(body).encode())
            self._last[op["uri"]] = content
        return await send(request)


async def test_an_outage_during_a_lease_renewal_does_not_stop_the_owner(
    openviking: OpenVikingEndpoint, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The owner renews its lease on every round here, and OpenViking refuses its first renewal.
    The job retries it, as it retries its own steps, and completes: it neither stops nor waits
    for its lease to expire and a sweep."""
    monkeypatch.setattr(worker, "RENEW_SECONDS", 0.0)
    down = LeaseRenewalsDown(attempts=RetryPolicy().max_attempts)
    caplog.set_level(logging.WARNING, logger=worker.log.name)
    async with replica(settings_for(openviking.base_url), [down]) as service:
        who = identity()
        writer = StreamWriter(service.openviking, who)
        await writer.append(conversation(LINES))
        answer = await service.stub.Compact(compact_request(who, background=True), timeout=60)
        down.armed = True  # the job runs: the lease is its to renew
        cp = await settled(service.stub, who, answer.checkpoint.checkpoint_id, within=60)
        # the renewal was refused (its retries too, unless the poll above finalised the checkpoint
        # meanwhile: the job's next write then changes more than the lease and is no renewal)
        assert down.attempts < RetryPolicy().max_attempts
        assert_committed(cp, (await writer.state()).sessions[0])
        assert not [r for r in caplog.records if "stopped" in r.getMessage()]


class CheckpointsNotFound:
    """HTTP middleware: every read of a checkpoint document is answered 404, as OpenViking
    answered one while it shut down (a reader then took the checkpoint for a new one)."""

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        uri = dict(request.query).get("uri", "")
        if request.path.endswith("/content/read") and "/checkpoints/" in uri:
            body = {"status": "error", "error": {"code": "NOT_FOUND", "message": "File not found"}}
            return HttpResponse(404, "Not Found", json.dumps(body).encode())
        return await send(request)


async def test_a_finished_checkpoint_is_never_created_again(
    openviking: OpenVikingEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the chaos run: a hand-off's checkpoint, COMPLETED and dropped from the stream,
    was written again as a new PENDING one by a caller whose read had found nothing. Even a
    caller that never sees the document, and may take over any creation at once, cannot."""
    monkeypatch.setattr(document_slots, "TAKEOVER_AFTER_SECONDS", 0.0)
    async with replica(settings_for(openviking.base_url)) as service:
        writer, entry, cp = await committed_hand_off(service)
        tenant = writer.identity.tenant
        blind = OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[CheckpointsNotFound()])
        async with blind:
            store = CheckpointStore(DocumentStore(blind))
            assert await store.read(tenant, entry.checkpoint_id) is None  # it sees nothing
            assert not await store.create(tenant, new_record(writer.identity, entry))
        stored = await CheckpointStore(DocumentStore(service.openviking)).read(tenant, entry.checkpoint_id)
        assert stored is not None and stored.status == COMPLETED and stored.archive_uri == cp.archive_uri
