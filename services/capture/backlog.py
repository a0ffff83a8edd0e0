"""The turn index's writes, queued behind the appends and bounded per replica (issue 33).

The caller never waits for the turn index: a write's persisted exchanges are queued here and
`INDEX_WORKERS` tasks of this replica work the queue off, oldest first. A queued write waits up
to `coalesce` seconds (turnIndexCoalesceMs) for more writes of the same user to join it, then
one OpenViking call writes all of that user's queued exchanges, whichever sessions they belong
to: OpenViking spends ~26 ms of CPU on a turn-index document written alone and ~17 ms on each of
four written together (`python -m tests.bench.openviking_costs`). A compaction hand-off or a
flush of a stream (`expedite`) and shutdown (`drain`) write the user's queued exchanges at once,
so compaction finds them indexed instead of writing them a second time. The order of the
background work is so: a claim's outbox append starts at once (it is the turn), index writes
wait for their batch and a worker, and compaction nudges for their own queue
(`services.capture.compaction_client`).

Bounds: past `SOFT_BOUND` queued exchanges the replica says it is behind (`behind`: capture's
readiness turns NOT_SERVING, so new streams go to other replicas, and the queue-depth metric
is what an autoscaler adds replicas on); at `HARD_BOUND` a new turn is refused with
RESOURCE_EXHAUSTED and a retry hint before anything of it is claimed: nothing is lost, the host
delivers it again. A queued write that fails or is cut short by shutdown is not lost either:
compaction indexes what of a session is missing before it archives it (`catch_up`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import grpc

from shared.domain.turn_index import IndexedMessage
from shared.domain.turn_index_writer import Captured, TurnIndexWriter
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


@dataclass(frozen=True, eq=False)
class _Queued:
    tenant: Tenant
    captured: Captured
    since: float
    on_written: Callable[[], None] | None = None

    @property
    def size(self) -> int:
        return len(self.captured.messages)


class IndexBacklog:
    def __init__(
        self,
        index: TurnIndexWriter,
        *,
        coalesce: float = 0.0,
        soft: int = SOFT_BOUND,
        hard: int = HARD_BOUND,
        workers: int = INDEX_WORKERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._index = index
        self._coalesce = coalesce
        self._soft = soft
        self._hard = hard
        self._workers = workers
        self._clock = clock
        self._queue: deque[_Queued] = deque()
        self._queued = 0
        self._running: set[asyncio.Task[None]] = set()
        self._urgent: set[Tenant] = set()
        """Users whose queued exchanges are written without waiting for their batch (`expedite`)."""
        self._draining = 0
        self._wake = asyncio.Event()
        self._writing: set[_Queued] = set()
        self._progress = asyncio.Event()
        """Set (and replaced) each time a batch is done."""

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

    def add(
        self,
        tenant: Tenant,
        session_id: str,
        messages: Sequence[IndexedMessage],
        *,
        on_written: Callable[[], None] | None = None,
    ) -> None:
        """Queue the exchanges for the index; the caller does not wait. `on_written` is called
        once they are written (not when the write failed; at once when there is nothing to write)."""
        if not messages:
            if on_written is not None:
                on_written()
            return
        captured = self._index.captured(session_id, messages)
        self._queue.append(_Queued(tenant, captured, self._clock(), on_written))
        self._queued += len(messages)
        while len(self._running) < self._workers:
            worker = asyncio.create_task(self._work(), name="turn-index-backlog")
            self._running.add(worker)
            worker.add_done_callback(self._running.discard)

    def expedite(self, tenant: Tenant) -> None:
        """Write the user's queued exchanges without waiting for their batch to fill (a
        compaction of one of its sessions is about to look for them, or they came in bulk)."""
        if any(queued.tenant == tenant for queued in self._queue):
            self._urgent.add(tenant)
            self._wake.set()

    async def written(self, tenant: Tenant) -> None:
        """Until the user's exchanges queued or being written now are written (or failed:
        compaction indexes what is missing)."""
        held = frozenset(q for q in (*self._queue, *self._writing) if q.tenant == tenant)
        while held & {*self._queue, *self._writing}:
            await self._progress.wait()

    async def drain(self) -> None:
        """Write everything queued now (shutdown; bound it with a timeout)."""
        self._draining += 1
        self._wake.set()
        try:
            while self._running:
                await asyncio.gather(*list(self._running), return_exceptions=True)
        finally:
            self._draining -= 1

    def _due(self) -> _Queued | float:
        """The queued write to send now (the oldest whose wait is over, or the first of a user
        expedited), else how long until the oldest one's wait is over."""
        oldest = self._queue[0]
        wait = oldest.since + self._coalesce - self._clock()
        if wait <= 0 or self._draining or self._queued >= MAX_BATCH:
            return oldest
        for queued in self._queue:
            if queued.tenant in self._urgent:
                return queued
        return wait

    async def _next(self) -> _Queued | None:
        """The queued write to send next, once it is due (None when the queue ran empty)."""
        while self._queue:
            due = self._due()
            if isinstance(due, _Queued):
                return due
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), due)
        return None

    def _take(self, first: _Queued) -> list[_Queued]:
        """`first` and every other queued write of its user (up to `MAX_BATCH` exchanges)."""
        batch: list[_Queued] = []
        kept, size = deque[_Queued](), 0
        for queued in (first, *(q for q in self._queue if q is not first)):
            if queued.tenant == first.tenant and (not batch or size + queued.size <= MAX_BATCH):
                batch.append(queued)
                size += queued.size
            else:
                kept.append(queued)
        self._queue = kept
        if not any(queued.tenant == first.tenant for queued in kept):
            self._urgent.discard(first.tenant)
        return batch

    async def _work(self) -> None:
        """Work the queue off; the worker ends when it is empty (`add` starts it again)."""
        await after_answer()  # started by a call: its answer leaves first
        while (first := await self._next()) is not None:
            batch = self._take(first)
            self._writing.update(batch)
            try:
                written = await self._index.add_captured(first.tenant, [queued.captured for queued in batch])
            finally:
                self._queued -= sum(queued.size for queued in batch)
                self._writing.difference_update(batch)
                self._progress.set()
                self._progress = asyncio.Event()
            now = self._clock()
            for queued in batch:
                record_turn_index_lag(now - queued.since)
                if written is not None and queued.on_written is not None:
                    queued.on_written()


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
