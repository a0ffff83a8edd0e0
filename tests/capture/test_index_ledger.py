"""A replica killed while it holds exchanges for the turn index loses none of them (issue 33).

The stream state records every claimed range as unindexed until the replica that indexed it says
so in a later claim (`services.capture.index_ledger`); a range left unconfirmed past
`turnIndexRecoverAfterMs` is indexed again by the stream's next claim on any replica. The dead
replica here is real capture logic whose link to OpenViking for the turn index holds every
request (what kill -9 leaves: the exchanges never reach OpenViking); real OpenViking, real
stream state, real index documents.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.capture.backlog import IndexBacklog
from services.capture.claim_repair import ClaimRepair
from services.capture.compaction_client import CompactionNudger
from services.capture.index_ledger import IndexLedger
from services.capture.outbox_sweep import OutboxSweep
from services.capture.transcript import TranscriptWriter
from services.capture.triggers import TriggerThresholds
from services.capture.turns import TurnCapture
from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore, UnindexedRange, session_id_for, utc_now
from shared.domain.turn_index import session_index_uri, turn_uri
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.errors import BackendNotFound
from shared.localstack.processes import free_port
from shared.openviking.client import OpenVikingClient
from tests.capture.conftest import new_identity, parsed
from tests.capture.test_backlog import commit
from tests.capture.test_outbox import COUNTER
from tests.support.call_log import CallLog

RECOVER_AFTER = 1.0
"""turnIndexRecoverAfterMs of these replicas, in seconds (its smallest allowed value)."""
TURNS_BEFORE = 3
"""Turns the doomed replica answers before it dies."""


def replica(
    ov: OpenVikingClient, index_ov: OpenVikingClient, settings: Settings
) -> tuple[TurnCapture, IndexBacklog, IndexLedger]:
    """A capture replica's turn logic (compaction unreachable) whose turn index goes over `index_ov`."""
    states = StreamStateStore(DocumentStore(ov))
    writer = TurnIndexWriter(index_ov)
    ledger = IndexLedger(ov, writer, recover_after=RECOVER_AFTER)
    backlog = IndexBacklog(writer)
    dead = f"127.0.0.1:{free_port()}"
    capture = TurnCapture(
        states,
        TranscriptWriter(ov, states, ledger=ledger),
        CompactionNudger(lambda: dead),
        TriggerThresholds.from_settings(settings),
        default_encoding=settings.default_encoding,
        capture_max_length=settings.capture_max_length,
        index=backlog,
        ledger=ledger,
    )
    return capture, backlog, ledger


async def index_names(ov: OpenVikingClient, identity: RequestIdentity, session_id: str) -> list[str]:
    try:
        listing = await ov.ls(identity.tenant, session_index_uri(session_id))
    except BackendNotFound:  # no document of the session yet
        return []
    return sorted(entry.uri.rsplit("/", 1)[-1] for entry in listing.entries)


def document_names(session_id: str, turns: range) -> list[str]:
    """One index document per turn (`turn_messages`: one exchange of four messages)."""
    return sorted(turn_uri(session_id, 4 * n).rsplit("/", 1)[-1] for n in turns)


async def stored_state(ov: OpenVikingClient, identity: RequestIdentity) -> StreamState:
    state = await StreamStateStore(DocumentStore(ov)).load(identity)
    assert state is not None
    return state


async def killed_replica_answered(
    ov: OpenVikingClient, dead_index: OpenVikingClient, settings: Settings
) -> tuple[RequestIdentity, str, IndexBacklog]:
    """A new stream whose first `TURNS_BEFORE` turns a replica answered (stored in the session)
    while none of its index writes reach OpenViking: (the stream, its session, that backlog)."""
    identity = parsed(new_identity())
    doomed, doomed_backlog, _ = replica(ov, dead_index, settings)
    for n in range(TURNS_BEFORE):
        assert await commit(doomed, identity, n) == 4 * n + 3  # answered: stored in the session
    return identity, session_id_for(identity.stream_id, 0), doomed_backlog


@pytest.mark.stack
async def test_exchanges_a_killed_replica_held_for_the_index_are_indexed_once_by_the_next_claim(
    settings: Settings, ov: OpenVikingClient, held: tuple[CallLog, OpenVikingClient]
) -> None:
    link, dead_index = held  # the dead replica's index link: none of its writes reach OpenViking
    identity, session, doomed_backlog = await killed_replica_answered(ov, dead_index, settings)
    claimed = await stored_state(ov, identity)
    assert [(u.start, u.end) for u in claimed.unindexed] == [(4 * n, 4 * n + 3) for n in range(TURNS_BEFORE)]
    await asyncio.sleep(RECOVER_AFTER)
    assert {c.held for c in link.calls} == {True}  # none of its index writes reached OpenViking

    survivor, backlog, ledger = replica(ov, ov, settings)
    assert await commit(survivor, identity, TURNS_BEFORE) == 4 * TURNS_BEFORE + 3
    await ledger.drain()
    await backlog.drain()
    assert await index_names(ov, identity, session) == document_names(session, range(TURNS_BEFORE + 1))

    # the survivor's next claim removes what it indexed (the dead replica's ranges and its own)
    assert await commit(survivor, identity, TURNS_BEFORE + 1) == 4 * TURNS_BEFORE + 7
    newest = 4 * (TURNS_BEFORE + 1)
    assert [(u.start, u.end) for u in (await stored_state(ov, identity)).unindexed] == [(newest, newest + 3)]

    # the dead replica's writes landing after all replace the same documents, never add to them
    link.let_go()
    await doomed_backlog.drain()
    await backlog.drain()
    assert await index_names(ov, identity, session) == document_names(session, range(TURNS_BEFORE + 2))


@pytest.mark.stack
async def test_a_replica_that_served_a_quiet_stream_indexes_what_a_killed_replica_held(
    settings: Settings, ov: OpenVikingClient, held: tuple[CallLog, OpenVikingClient]
) -> None:
    """The stream is never claimed again (the host's retry was a duplicate, the conversation
    ended): the replica that served it looks at it once it is quiet, waits until the dead
    replica's ranges are stale, then indexes them, once."""
    link, dead_index = held
    identity, session, doomed_backlog = await killed_replica_answered(ov, dead_index, settings)
    states = StreamStateStore(DocumentStore(ov))
    ledger = IndexLedger(ov, TurnIndexWriter(ov), recover_after=RECOVER_AFTER)
    sweep = OutboxSweep(states, ClaimRepair(ov, states, utc_now).repair, utc_now, quiet=0.0,
                        recover_index=ledger.recover_quiet)  # fmt: skip
    sweep.served(identity, COUNTER)
    await sweep.sweep_once()  # not stale yet: looked at again when they would be
    await ledger.drain()
    assert sweep.watched == 1
    assert await index_names(ov, identity, session) == []

    await asyncio.sleep(RECOVER_AFTER)
    await sweep.sweep_once()
    await ledger.drain()
    assert sweep.watched == 0
    assert await index_names(ov, identity, session) == document_names(session, range(TURNS_BEFORE))

    link.let_go()  # the dead replica's writes landing after all replace the same documents
    await doomed_backlog.drain()
    assert await index_names(ov, identity, session) == document_names(session, range(TURNS_BEFORE))
    await sweep.close()


def ranges(draw_ages: list[tuple[int, bool]]) -> list[UnindexedRange]:
    now = utc_now()
    return [
        UnindexedRange(session_id="s", start=4 * i, end=4 * i + 3, since=now - timedelta(seconds=age))
        for i, (age, _) in enumerate(draw_ages)
    ]


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=8))
def test_a_claim_drops_what_this_replica_indexed_and_takes_over_only_the_stale_rest(
    ages: list[tuple[int, bool]],
) -> None:
    """Ages in whole seconds against a 2 s recovery; the flag: this replica indexed the range."""
    identity = parsed(new_identity())
    ledger = IndexLedger(None, None, recover_after=2.0)  # type: ignore[arg-type]  # fold reads neither
    state = StreamState(host_session_id="h", agent_id="a", stream_id="x", active_session="s")
    state.unindexed = ranges(ages)
    before = list(state.unindexed)
    for entry, (_, indexed_here) in zip(before, ages, strict=True):
        if indexed_here:
            ledger.indexed(identity, entry.session_id, entry.start, entry.end)
    now = utc_now()
    taken: list[UnindexedRange] = []
    ledger.fold(identity, state, now, taken)

    left = [(e.start, e.end) for e, (_, indexed_here) in zip(before, ages, strict=True) if not indexed_here]
    assert [(e.start, e.end) for e in state.unindexed] == left
    stale = [(e.start, e.end) for e in before if now - e.since >= timedelta(seconds=2)]
    assert [(e.start, e.end) for e in taken] == [r for r in left if r in stale]
    assert all(e.since == now for e in taken) and all(e in state.unindexed for e in taken)
