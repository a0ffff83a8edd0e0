"""The turn index's writes, queued behind the appends and bounded per replica (issue 33).

The caller never waits for the turn index: a write's persisted exchanges are queued here and
`INDEX_WORKERS` tasks of this replica work the queue off, oldest first, one OpenViking call per
session in the queue (queued exchanges of one session are written together: several turns in
one `batch-write` when the index falls behind). The order of the background work is so: a
claim's outbox append starts at once (it is the turn), index writes wait for a worker, and
compaction nudges for their own queue (`services.capture.compaction_client`).

Bounds: past `SOFT_BOUND` queued exchanges the replica says it is behind (`behind`: capture's
readiness turns NOT_SERVING, so new streams go to other replicas, and the queue-depth metric
is what an autoscaler adds replicas on); at `HARD_BOUND` a new turn is refused with
RESOURCE_EXHAUSTED and a retry hint before anything of it is claimed: nothing is lost, the host
delivers it again. A queued write that fails or is cut short by shutdown is not lost either:
compaction indexes what of a session is missing before it archives it (`catch_up`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import grpc

from shared.domain.turn_index import IndexedMessage
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.errors import ContextEngineError
from shared.openviking.tenant import Tenant
from shared.runtime.answer_first import after_answer
from shared.telemetry.metrics import record_background_refused, record_turn_index_lag

log = logging.getLogger(__name__)

INDEX_WORKERS = 2
"""Concurrent index writes per replica: the appends keep the rest of OpenViking's attention."""
SOFT_BOUND = 512
"""Queued exchanges past which the replica reports it is behind (readiness, metric)."""
HARD_BOUND = 4096
"""Queued exchanges at which new turns are refused (RESOURCE_EXHAUSTED, retry later)."""
RETRY_AFTER_SECONDS = 2
"""The retry hint of a refused turn."""
MAX_BATCH = 100
"""Exchanges written in one OpenViking call at most."""


class BacklogFull(ContextEngineError):
    """The replica's background work is at its hard bound; nothing of the call was stored."""

    status_code = grpc.StatusCode.RESOURCE_EXHAUSTED


@dataclass(frozen=True)
class _Queued:
    tenant: Tenant
    session_id: str
    messages: Sequence[IndexedMessage]
    since: float


class IndexBacklog:
    def __init__(
        self,
        index: TurnIndexWriter,
        *,
        soft: int = SOFT_BOUND,
        hard: int = HARD_BOUND,
        workers: int = INDEX_WORKERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._index = index
        self._soft = soft
        self._hard = hard
        self._workers = workers
        self._clock = clock
        self._queue: deque[_Queued] = deque()
        self._queued = 0
        self._running: set[asyncio.Task[None]] = set()

    @property
    def depth(self) -> int:
        """Exchanges queued and not yet written (those being written included)."""
        return self._queued

    @property
    def oldest_seconds(self) -> float:
        """How long the oldest queued exchange has waited (0 when none)."""
        return self._clock() - self._queue[0].since if self._queue else 0.0

    @property
    def behind(self) -> bool:
        return self._queued >= self._soft

    def admit(self, method: str) -> None:
        """Before a turn is claimed: refuse it while the queue is at its hard bound."""
        if self._queued >= self._hard:
            record_background_refused(method, "turn_index")
            raise BacklogFull(
                f"capture's background work is behind ({self._queued} exchanges to index); "
                f"retry in {RETRY_AFTER_SECONDS} s (nothing of this call was stored)"
            )

    def add(self, tenant: Tenant, session_id: str, messages: Sequence[IndexedMessage]) -> None:
        """Queue the exchanges for the index; the caller does not wait."""
        if not messages:
            return
        self._queue.append(_Queued(tenant, session_id, messages, self._clock()))
        self._queued += len(messages)
        while len(self._running) < self._workers:
            worker = asyncio.create_task(self._work(), name="turn-index-backlog")
            self._running.add(worker)
            worker.add_done_callback(self._running.discard)

    async def drain(self) -> None:
        """Write everything queued (shutdown; bound it with a timeout)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    def _take(self) -> list[_Queued]:
        """The oldest queued write and every later one of the same session (up to `MAX_BATCH`)."""
        first = self._queue.popleft()
        batch, kept, size = [first], deque[_Queued](), len(first.messages)
        while self._queue:
            queued = self._queue.popleft()
            same = (queued.tenant, queued.session_id) == (first.tenant, first.session_id)
            if same and size + len(queued.messages) <= MAX_BATCH:
                batch.append(queued)
                size += len(queued.messages)
            else:
                kept.append(queued)
        self._queue = kept
        return batch

    async def _work(self) -> None:
        """Work the queue off; the worker ends when it is empty (`add` starts it again)."""
        await after_answer()  # started by a call: its answer leaves first
        while self._queue:
            batch = self._take()
            first = batch[0]
            messages = [m for queued in batch for m in queued.messages]
            try:
                await self._index.add(first.tenant, first.session_id, messages)
            finally:
                self._queued -= len(messages)
            now = self._clock()
            for queued in batch:
                record_turn_index_lag(now - queued.since)


@dataclass(frozen=True)
class CaptureBackground:
    """A capture replica's background queues, for the gauges (`watch_background`) and readiness."""

    index: IndexBacklog
    appends: Callable[[], int]
    """Appends (and their releases) this replica owns and has not finished."""
    nudges: Callable[[], int]
    """Compaction nudges not delivered yet."""

    def behind(self) -> bool:
        """Past the soft bound (capture's readiness)."""
        return self.index.behind

    def background_queues(self) -> Mapping[str, tuple[int, float]]:
        return {
            "turn_index": (self.index.depth, self.index.oldest_seconds),
            "appends": (self.appends(), 0.0),
            "nudges": (self.nudges(), 0.0),
        }
