"""FlushSessions and the shutdown flush: a stream's uncommitted turns handed to compaction,
every turn answered as stored among them, whichever replica claimed it.

Per stream: complete every acknowledged outbox first (`acknowledged`: a dead owner's claim is
completed from its outbox), then hand a FLUSH compaction off in one compare-and-swap of the stream
state (durable on return) and nudge compaction once the user's held exchanges are in the turn
index. Streams are flushed concurrently; every one is tried before the first failure is raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from contextengine.v1 import checkpoint_pb2

from services.capture.acknowledged import AcknowledgedTurns
from services.capture.compaction_client import CompactionNudger
from shared.domain.checkpoints import new_checkpoint_id
from shared.domain.handoff import hand_off
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.errors import Aborted
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

FLUSH_WAIT_SECONDS = 3.0
"""A flush waits this long for a write in progress on the session before giving up (ABORTED)."""

Indexed = Callable[[RequestIdentity], Callable[[], Awaitable[None]] | None]
"""The user's held exchanges sent to the turn index now, and how to wait until they are written."""


class StreamFlush:
    def __init__(
        self,
        states: StreamStateStore,
        acknowledged: AcknowledgedTurns,
        nudger: CompactionNudger,
        *,
        default_encoding: str,
        indexed: Indexed,
        clock: Callable[[], datetime],
    ) -> None:
        self._states = states
        self._acknowledged = acknowledged
        self._nudger = nudger
        self._default_encoding = default_encoding
        self._indexed = indexed
        self._clock = clock

    async def flush(
        self, identities: Sequence[RequestIdentity], *, deadline: float | None = None
    ) -> list[checkpoint_pb2.CompactCheckpoint]:
        """Start a FLUSH compaction for every stream with uncommitted turns, concurrently.

        Every stream is tried; the first failure is raised after all have been tried.
        """
        results = await asyncio.gather(
            *(self._flush_one(identity, deadline) for identity in identities), return_exceptions=True
        )
        checkpoints = [r for r in results if isinstance(r, checkpoint_pb2.CompactCheckpoint)]
        failures = [r for r in results if isinstance(r, BaseException)]
        for identity, result in zip(identities, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("flush of %s failed: %s", identity.buffer_key, result)
        if failures:
            raise failures[0]
        return checkpoints

    async def _flush_one(
        self, identity: RequestIdentity, deadline: float | None
    ) -> checkpoint_pb2.CompactCheckpoint | None:
        """Hand off a FLUSH compaction of the stream's uncommitted turns (durable on return),
        every turn answered as stored among them, whichever replica claimed it."""
        counter = TokenCounter.for_model("", self._default_encoding)
        await self._acknowledged.complete(identity, counter, deadline=deadline)
        checkpoint_id = new_checkpoint_id(identity.stream_id)
        give_up = time.monotonic() + FLUSH_WAIT_SECONDS
        outcome: list[StreamState | bool | None] = []

        def flush(state: StreamState) -> StreamState | None:
            result = hand_off(
                state, checkpoint_id, now=self._clock(), trigger=checkpoint_pb2.COMPACTION_TRIGGER_FLUSH
            )
            outcome[:] = [result]
            return result if isinstance(result, StreamState) else None

        while True:
            outcome.clear()
            state, written = await self._states.update(identity, flush, deadline=deadline)
            if written or not outcome or outcome[0] is not False:
                break
            if time.monotonic() > give_up:
                raise Aborted(f"a turn of {identity.buffer_key} is being written; retry the flush")
            await asyncio.sleep(0.1)
        if state.inflight:
            flushed = checkpoint_pb2.COMPACTION_TRIGGER_FLUSH
            self._nudger.nudge(identity, flushed, after=self._indexed(identity))
        if not written:
            return None
        entry = state.inflight[-1]
        return checkpoint_pb2.CompactCheckpoint(
            checkpoint_id=entry.checkpoint_id,
            session_id=entry.session_id,
            status=checkpoint_pb2.CHECKPOINT_STATUS_PENDING,
            trigger=checkpoint_pb2.COMPACTION_TRIGGER_FLUSH,
            host_session_id=identity.session_id,
            agent_id=identity.agent_id,
        )
