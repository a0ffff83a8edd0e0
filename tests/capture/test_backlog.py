"""The turn index's queue (`services.capture.backlog`) over real OpenViking: the caller never waits
for it, it writes a session's queued exchanges together, it says when it is behind, and at its
hard bound a turn is refused before anything of it is stored.

The index writes go through a `CallLog` that holds every request until `let_go`: a turn that
returns while they are held did not wait for them - shown without timing anything.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from services.capture.backlog import BacklogFull, IndexBacklog
from services.capture.turns import FencedTurn
from shared.config import Settings, load_settings
from shared.domain.documents import DocumentStore
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamStateStore, session_id_for
from shared.domain.turn_index import IndexedMessage, session_index_uri
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import build_openviking_client
from tests.capture.conftest import new_identity, parsed
from tests.capture.test_commit_turn import capture_replica, turn_messages
from tests.support.call_log import CallLog
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

TURNS = 6


@pytest.fixture
def settings(openviking: OpenVikingEndpoint) -> Settings:
    return load_settings(environ={}, overrides={"baseUrl": openviking.base_url})


@pytest.fixture
async def ov(settings: Settings) -> AsyncIterator[OpenVikingClient]:
    async with build_openviking_client(settings) as client:
        yield client


@pytest.fixture
async def held(settings: Settings) -> AsyncIterator[tuple[CallLog, OpenVikingClient]]:
    """The index's own link to OpenViking, holding every request until `let_go`."""
    log = CallLog()
    log.hold_after(0)
    async with build_openviking_client(settings, middlewares=[log]) as client:
        yield log, client


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
