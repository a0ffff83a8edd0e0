"""The stream state once capture's releases are written (they follow a turn's answer shortly)."""

from __future__ import annotations

import asyncio
import time

from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore

SETTLE_WITHIN_SECONDS = 30.0
"""A release is written a fraction of a second after its turn; this only bounds a broken one."""


async def settled_stream_state(
    states: StreamStateStore, identity: RequestIdentity, *, within: float = SETTLE_WITHIN_SECONDS
) -> StreamState:
    """The stored state once no claim is held (its release written), read from OpenViking."""
    give_up = time.monotonic() + within
    while True:
        state = await states.load(identity)
        assert state is not None, identity.buffer_key
        if state.pending_write is None:
            return state
        assert time.monotonic() < give_up, f"{state.pending_write} of {identity.buffer_key} never released"
        await asyncio.sleep(0.05)
