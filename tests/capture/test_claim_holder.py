"""A claim's holder stops working on it once it may have been taken over (real OpenViking).

An owner whose append the transport keeps retrying through an OpenViking outage must not let
it land after a repairer completed the claim (the duplicate a chaos run found after an
OpenViking restart): `ClaimHolder.while_fresh` cancels the work at the holder's first
heartbeat that finds the claim taken over, or `KEPT_FRESH_SECONDS` after its last refresh.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from services.capture.claims import (
    CLAIM_HEARTBEAT_SECONDS,
    KEPT_FRESH_SECONDS,
    LATE_LANDING_GRACE_SECONDS,
    STALE_CLAIM_SECONDS,
    ClaimHolder,
)
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.stream_state import PendingWrite, StreamState, StreamStateStore, utc_now
from shared.errors import BackendTimeout
from shared.runtime.context import build_openviking_client
from tests.capture.conftest import new_identity, parsed
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack


def test_a_holder_gives_up_before_its_claim_can_be_repaired() -> None:
    assert KEPT_FRESH_SECONDS + LATE_LANDING_GRACE_SECONDS <= STALE_CLAIM_SECONDS
    assert KEPT_FRESH_SECONDS > 2 * CLAIM_HEARTBEAT_SECONDS  # one lost refresh is not enough


async def test_an_owner_whose_claim_was_taken_over_stops_its_append(openviking: OpenVikingEndpoint) -> None:
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        states = StreamStateStore(DocumentStore(ov))
        identity = parsed(new_identity())

        def claim(state: StreamState) -> StreamState:
            state.pending_write = PendingWrite(
                start_sequence=0, end_sequence=1, session_id=state.active_session, claimed_at=utc_now()
            )
            return state

        state, _ = await states.update(identity, claim)
        held = state.pending_write
        assert held is not None
        finished = asyncio.Event()

        async def endless_append() -> None:  # a transport retrying through an outage
            try:
                await asyncio.sleep(3600)
            finally:
                finished.set()

        async with ClaimHolder(states, identity, held, utc_now) as holder:
            fresh = await holder.while_fresh(asyncio.sleep(0.01, "done"))
            assert fresh == "done"  # a claim kept fresh: the work's result

            def take_over(current: StreamState) -> StreamState:
                assert current.pending_write is not None
                current.pending_write = current.pending_write.model_copy(update={"claimed_at": utc_now()})
                return current

            await states.update(identity, take_over)
            started = time.monotonic()
            with pytest.raises(BackendTimeout):
                await holder.while_fresh(endless_append())
        assert finished.is_set()  # cancelled, not left running
        assert time.monotonic() - started < CLAIM_HEARTBEAT_SECONDS + 5
