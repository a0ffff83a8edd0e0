"""Writes the turn index (shared.domain.turn_index).

Capture indexes what its writes persisted off the caller's path (`services.capture.backlog`
queues them and calls `add_captured`): one `batch-write` with `wait=false` for several writes of
one user. A failed index write never fails the turn: the messages are already stored, and
compaction indexes whatever of the session is missing (`catch_up`) before it archives it. The
documents' URIs are deterministic, so a rewrite replaces instead of duplicating.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from shared.domain.envelope import PersistedTurn
from shared.domain.stream_state import utc_now
from shared.domain.turn_index import (
    TURN_INDEX_ROOT,
    TURN_PROCESSING_MODE,
    IndexedMessage,
    TurnDocument,
    session_index_uri,
    turn_documents,
    write_operations,
)
from shared.errors import BackendConflict, BackendInvalidArgument, BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

log = logging.getLogger(__name__)

T = TypeVar("T")
BUSY_RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0, 4.0)
"""Pauses before the next attempt of an index write OpenViking refused as busy (~8 s in all)."""
CATCH_UP_BUSY_SECONDS = (0.5, 1.0, 2.0, 4.0)
"""Compaction's catch-up looks again after each of these pauses while its write is refused as
busy (~7.5 s): another write holds the documents (capture's, or one OpenViking still finishes
after a restart), and once it lands the look finds nothing missing. Giving up after one look
left an exchange of a chaos run unindexed for good: its stream was never claimed again."""
MAX_LISTED = 1_000_000
"""ls node_limit when listing one session's documents (all of them)."""


@dataclass(frozen=True)
class Captured:
    """Messages one write persisted, to index: dated with the host's timestamps, else `captured_at`."""

    session_id: str
    messages: Sequence[IndexedMessage]
    captured_at: datetime


class TurnIndexWriter:
    def __init__(self, openviking: OpenVikingClient, clock: Callable[[], datetime] = utc_now) -> None:
        self._ov = openviking
        self._clock = clock

    async def add(
        self,
        tenant: Tenant,
        session_id: str,
        messages: Sequence[IndexedMessage],
        *,
        deadline: float | None = None,
    ) -> int | None:
        """Index `messages` (just persisted, sequence order); the number of documents written
        (None: the write failed).

        Failures are logged, not raised: the turn is stored, and compaction catches up.
        """
        return await self.add_captured(tenant, [self.captured(session_id, messages)], deadline=deadline)

    def captured(self, session_id: str, messages: Sequence[IndexedMessage]) -> Captured:
        """`messages` as persisted now, to index now or later (`add_captured`)."""
        return Captured(session_id, messages, self._clock())

    async def add_captured(
        self, tenant: Tenant, captured: Sequence[Captured], *, deadline: float | None = None
    ) -> int | None:
        """Index what several writes of one user persisted (any of its sessions) in one call; the
        number of documents written, None when the write failed (logged, not raised: compaction
        and the index ledger catch up)."""
        documents = [
            document
            for part in captured
            for document in turn_documents(part.session_id, part.messages, part.captured_at)
        ]
        if not documents:
            return 0
        try:
            await self._write(tenant, documents, deadline)
        except Exception as exc:
            sessions = ", ".join(sorted({part.session_id for part in captured}))
            log.warning("turn index write for session(s) %s failed (%s); compaction will re-index it",
                        sessions, type(exc).__name__)  # fmt: skip
            return None
        return len(documents)

    async def catch_up(
        self,
        tenant: Tenant,
        session_id: str,
        turns: Sequence[PersistedTurn],
        *,
        deadline: float | None = None,
    ) -> int:
        """Index the exchanges of `turns` (one session's, stored) that have no document yet; the
        number written. Raises on failure (the caller decides whether that matters). When
        OpenViking reports some of them busy (capture is writing them), it looks again after a
        pause (`CATCH_UP_BUSY_SECONDS`) and writes only what is still missing: it never repeats
        a write that landed meanwhile (a bulk Ingest's takes seconds, and a synchronous Compact
        waits with the catch-up)."""
        messages = [IndexedMessage(t.sequence, t.message) for t in sorted(turns, key=lambda t: t.sequence)]
        documents = turn_documents(session_id, messages, self._clock())

        async def write_missing() -> int:
            present = await self._listed(tenant, session_id, deadline)
            missing = [d for d in documents if d.uri.rsplit("/", 1)[-1] not in present]
            if missing:
                await self._write(tenant, missing, deadline, busy_pauses=())
            return len(missing)

        return await _while_busy(write_missing, CATCH_UP_BUSY_SECONDS, deadline)

    async def _listed(self, tenant: Tenant, session_id: str, deadline: float | None) -> set[str]:
        """The names of the session's index documents."""
        try:
            listing = await self._ov.ls(
                tenant, session_index_uri(session_id), node_limit=MAX_LISTED, deadline=deadline
            )
        except BackendNotFound:
            return set()
        return {entry.uri.rsplit("/", 1)[-1] for entry in listing.entries}

    async def _write(
        self,
        tenant: Tenant,
        documents: Sequence[TurnDocument],
        deadline: float | None,
        *,
        busy_pauses: Sequence[float] = BUSY_RETRY_SECONDS,
    ) -> None:
        operations = write_operations(documents)
        try:
            await self._batch(tenant, operations, deadline, busy_pauses)
        except (BackendNotFound, BackendInvalidArgument):
            # First exchange of this user: the index folder does not exist yet.
            with contextlib.suppress(BackendConflict):  # another replica created it meanwhile
                await self._ov.mkdir(tenant, TURN_INDEX_ROOT, deadline=deadline)
            await self._batch(tenant, operations, deadline, busy_pauses)

    async def _batch(
        self,
        tenant: Tenant,
        operations: list[dict[str, object]],
        deadline: float | None,
        busy_pauses: Sequence[float],
    ) -> None:
        """One batch-write, tried again after each of `busy_pauses` while OpenViking reports a
        document of it busy: it locks a document while it writes it, and refuses a batch any
        document of which another write holds (409) - capture's write and compaction's catch-up of
        a session's exchanges met so and both lost them (5 of 64 sampled exchanges never indexed
        in a 32-caller burst, `tests/bench/phases/index_lag.py`)."""
        await _while_busy(lambda: self._send(tenant, operations, deadline), busy_pauses, deadline)

    async def _send(
        self, tenant: Tenant, operations: list[dict[str, object]], deadline: float | None
    ) -> None:
        await self._ov.batch_write(
            tenant,
            TURN_INDEX_ROOT,
            operations,
            wait=False,
            processing_mode=TURN_PROCESSING_MODE,
            deadline=deadline,
        )


async def _while_busy(
    attempt: Callable[[], Awaitable[T]], pauses: Sequence[float], deadline: float | None
) -> T:
    """`attempt()`, again after each of `pauses` while OpenViking refuses it as busy (409), unless
    the pause would pass `deadline`; the last refusal is raised."""
    for pause in pauses:
        try:
            return await attempt()
        except BackendConflict:
            if deadline is not None and time.monotonic() + pause > deadline:
                raise
            await asyncio.sleep(pause)
    return await attempt()
