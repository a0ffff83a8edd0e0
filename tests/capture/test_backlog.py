"""The turn index's queue (`services.capture.backlog`) over real OpenViking: the caller never waits
for it, it writes a user's queued exchanges together (held for more to join, sent at once when a
compaction is handed off), it says when it is behind, and at its hard bound a turn is refused
before anything of it is stored.

The index writes go through a `CallLog` that holds every request until `let_go`: a turn that
returns while they are held did not wait for them - shown without timing anything.
"""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from services.capture.backlog import BacklogFull, IndexBacklog
from services.capture.compaction_client import CompactionNudger
from services.capture.transcript import TranscriptWriter
from services.capture.triggers import TriggerThresholds
from services.capture.turns import FencedTurn, TurnCapture
from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamStateStore, session_id_for
from shared.domain.turn_index import TURN_INDEX_ROOT, IndexedMessage, session_index_uri
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.openviking.tenant import Tenant
from shared.runtime.context import InProcess, build_openviking_client
from tests.capture.conftest import new_identity, parsed
from tests.capture.test_commit_turn import capture_replica, turn_messages
from tests.support.call_log import CallLog

pytestmark = pytest.mark.stack

TURNS = 6
SETTLE_SECONDS = 10.0
"""Bound on waiting for a write the queue sends on its own (a failure, not a measurement)."""
HELD = 600.0
"""A batch window no test waits out."""


def exchange(n: int) -> list[IndexedMessage]:
    """Turn `n`'s messages at their sequences (one exchange: one index document)."""
    return [IndexedMessage(4 * n + i, m) for i, m in enumerate(turn_messages(n))]


async def new_user(ov: OpenVikingClient) -> Tenant:
    """A user whose index folder exists (its first write needs no retry)."""
    tenant = parsed(new_identity()).tenant
    await ov.mkdir(tenant, TURN_INDEX_ROOT)
    return tenant


async def indexed(ov: OpenVikingClient, tenant: Tenant, session_id: str) -> int:
    try:
        return len((await ov.ls(tenant, session_index_uri(session_id))).entries)
    except BackendNotFound:  # no folder: nothing indexed
        return 0


def index_writes(log: CallLog) -> int:
    return sum(c.route.endswith("batch-write") for c in log.calls)


async def settled(backlog: IndexBacklog, depth: int) -> None:
    """Until the queue is down to `depth` exchanges (bounded: a queue that never gets there fails)."""
    give_up = time.monotonic() + SETTLE_SECONDS
    while backlog.depth > depth:
        assert time.monotonic() < give_up, f"{backlog.depth} exchanges still queued"
        await asyncio.sleep(0.05)


async def commit(capture: object, identity: RequestIdentity, n: int) -> int:
    outcome = await capture.commit_turn(  # type: ignore[attr-defined]
        identity, FencedTurn(turn_messages(n), f"lt-{n}"), token_budget=0, model=""
    )
    return int(outcome.last_sequence)


async def test_turns_are_answered_while_the_index_is_stuck_and_it_catches_up_in_few_calls(
    settings: Settings, ov: OpenVikingClient, held: tuple[CallLog, OpenVikingClient]
) -> None:
    log, index_ov = held
    identity = parsed(new_identity())
    backlog = IndexBacklog(TurnIndexWriter(index_ov), soft=4 * 3, hard=1000, workers=1)
    capture = capture_replica(ov, StreamStateStore(DocumentStore(ov)), settings, index=backlog)
    for n in range(TURNS):
        # answered while every index write is held: the turn does not wait for its index write
        assert await commit(capture, identity, n) == 4 * n + 3
    assert backlog.depth == 4 * TURNS and backlog.behind and backlog.oldest_seconds > 0
    assert {c.held for c in log.calls} <= {True}
    log.let_go()
    await backlog.drain()
    assert backlog.depth == 0 and not backlog.behind
    listing = await ov.ls(identity.tenant, session_index_uri(session_id_for(identity.stream_id, 0)))
    assert len(listing.entries) == TURNS, listing  # one document per exchange, once
    batch_writes = [c for c in log.calls if c.route.endswith("batch-write")]
    # the first turn's write was taken alone, the five queued behind it went in one call (each
    # may be sent twice: the first write of a user creates the index folder and retries)
    assert 2 <= len(batch_writes) <= 4, [str(c) for c in log.calls]


async def test_a_turn_at_the_hard_bound_is_refused_with_a_retry_hint_and_nothing_is_stored(
    settings: Settings, ov: OpenVikingClient, held: tuple[CallLog, OpenVikingClient]
) -> None:
    log, index_ov = held
    identity = parsed(new_identity())
    states = StreamStateStore(DocumentStore(ov))
    backlog = IndexBacklog(TurnIndexWriter(index_ov), soft=1, hard=2, workers=1)
    backlog.add(identity.tenant, "another-session", [IndexedMessage(0, turn_messages(0)[0])] * 2)
    capture = capture_replica(ov, states, settings, index=backlog)
    with pytest.raises(BacklogFull) as refused:
        await commit(capture, identity, 0)
    assert refused.value.status_code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "retry in" in refused.value.message and "nothing of this call was stored" in refused.value.message
    assert await states.load(identity) is None  # not even a stream state
    log.let_go()
    await backlog.drain()
    assert await commit(capture, identity, 0) == 3  # below the bound again: stored


async def test_a_users_turns_are_held_for_one_write_across_sessions_until_their_batch_is_due(
    ov: OpenVikingClient, logged: tuple[CallLog, OpenVikingClient]
) -> None:
    log, index_ov = logged
    alice, bob = await new_user(ov), await new_user(ov)
    backlog = IndexBacklog(TurnIndexWriter(index_ov), coalesce=HELD)
    for n in range(3):
        backlog.add(alice, "a1", exchange(n))
        backlog.add(alice, "a2", exchange(n))
        backlog.add(bob, "b1", exchange(n))
    await asyncio.sleep(0.3)  # the workers have run: they hold the writes
    assert index_writes(log) == 0 and backlog.depth == 3 * 3 * 4
    backlog.expedite(alice)
    await asyncio.wait_for(backlog.written(alice), SETTLE_SECONDS)
    assert backlog.depth == 3 * 4  # bob's three turns are still held
    assert index_writes(log) == 1, [str(c) for c in log.calls]  # both sessions in one call
    assert [await indexed(ov, alice, s) for s in ("a1", "a2")] == [3, 3]
    assert await indexed(ov, bob, "b1") == 0
    await backlog.drain()
    assert index_writes(log) == 2 and await indexed(ov, bob, "b1") == 3


async def test_held_turns_are_written_together_once_their_window_passes(
    ov: OpenVikingClient, logged: tuple[CallLog, OpenVikingClient]
) -> None:
    log, index_ov = logged
    alice = await new_user(ov)
    backlog = IndexBacklog(TurnIndexWriter(index_ov), coalesce=0.3)
    for n in range(TURNS):
        backlog.add(alice, "a1", exchange(n))
    await settled(backlog, 0)  # no drain, no expedite: the window alone sends them
    assert index_writes(log) == 1 and await indexed(ov, alice, "a1") == TURNS


async def test_a_compaction_is_nudged_once_the_users_held_turns_are_indexed(
    settings: Settings, ov: OpenVikingClient, logged: tuple[CallLog, OpenVikingClient]
) -> None:
    """A hand-off sends the user's held exchanges at once (not when their window passes), and
    compaction is asked to own it only once they are written: it finds them in the index
    instead of writing them a second time."""
    _, index_ov = logged
    identity = parsed(new_identity())
    backlog = IndexBacklog(TurnIndexWriter(index_ov), coalesce=HELD)
    found_by_compaction: list[int] = []
    owned = asyncio.Event()

    async def own_hand_offs(stream: RequestIdentity) -> None:  # compaction, in this process
        found_by_compaction.append(await indexed(ov, stream.tenant, session_id_for(stream.stream_id, 0)))
        owned.set()

    states = StreamStateStore(DocumentStore(ov))
    capture = TurnCapture(
        states,
        TranscriptWriter(ov, states),
        CompactionNudger(lambda: "unused", local=InProcess(own_hand_offs=own_hand_offs)),
        TriggerThresholds.from_settings(settings.model_copy(update={"compact_turn_threshold": 2})),
        default_encoding=settings.default_encoding,
        capture_max_length=settings.capture_max_length,
        index=backlog,
    )
    for n in range(TURNS):
        outcome = await capture.commit_turn(
            identity, FencedTurn(turn_messages(n), f"lt-{n}"), token_budget=0, model=""
        )
        if outcome.trigger:
            break
    assert outcome.trigger, "no compaction was handed off"
    await asyncio.wait_for(owned.wait(), SETTLE_SECONDS)
    assert found_by_compaction == [n + 1]  # every exchange of the session, already indexed
    assert backlog.depth == 0


class Statuses:
    """HTTP middleware noting the status of every answer."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        response = await send(request)
        self.seen.append(response.status)
        return response


async def test_two_writes_of_the_same_exchanges_at_once_both_land(
    settings: Settings, ov: OpenVikingClient
) -> None:
    """OpenViking refuses a batch-write while another one holds any of its documents (409, busy):
    capture's write and compaction's catch-up of a session met so, and both lost the exchanges."""
    statuses = Statuses()
    async with build_openviking_client(settings, middlewares=[statuses]) as client:
        writer = TurnIndexWriter(client)
        for _ in range(3):  # until the two writes met (they did at the first try in every run)
            alice = await new_user(ov)
            late = [m for n in range(TURNS) for m in exchange(n)]
            written = await asyncio.gather(
                writer.add(alice, "a1", late[: len(late) // 2]), writer.add(alice, "a1", late)
            )
            assert written == [TURNS // 2, TURNS]  # neither was given up
            assert await indexed(ov, alice, "a1") == TURNS
            if 409 in statuses.seen:
                break
    assert 409 in statuses.seen, "the two writes never met: the test showed nothing"
