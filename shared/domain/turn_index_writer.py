"""Writes the turn index (shared.domain.turn_index).

Capture indexes what each write just persisted (`add_later`): one `batch-write` with
`wait=false` in a task of its own, after the caller was answered, so the exchange is findable a
fraction of a second later without the turn waiting for it (`drain` finishes them at
shutdown). A failed index write never fails the turn: the messages are already stored, and
compaction indexes whatever of the session is missing (`catch_up`) before it archives it. The
documents' URIs are deterministic, so a rewrite replaces instead of duplicating.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

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
from shared.runtime.answer_first import after_answer

log = logging.getLogger(__name__)

MAX_LISTED = 1_000_000
"""ls node_limit when listing one session's documents (all of them)."""


class TurnIndexWriter:
    def __init__(self, openviking: OpenVikingClient, clock: Callable[[], datetime] = utc_now) -> None:
        self._ov = openviking
        self._clock = clock
        self._writes: set[asyncio.Task[int]] = set()

    @property
    def running(self) -> int:
        """Index writes started by `add_later` and not finished yet."""
        return len(self._writes)

    def add_later(self, tenant: Tenant, session_id: str, messages: Sequence[IndexedMessage]) -> None:
        """`add` in a task of its own, once the caller has its answer (`after_answer`); the
        caller does not wait, `drain` waits for all of them."""
        write = asyncio.create_task(
            self._add_after_answer(tenant, session_id, messages), name=f"turn-index-{session_id}"
        )
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def _add_after_answer(
        self, tenant: Tenant, session_id: str, messages: Sequence[IndexedMessage]
    ) -> int:
        await after_answer()
        return await self.add(tenant, session_id, messages)

    async def drain(self) -> None:
        """Wait for every index write still running (bound it with a timeout)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    async def add(
        self,
        tenant: Tenant,
        session_id: str,
        messages: Sequence[IndexedMessage],
        *,
        deadline: float | None = None,
    ) -> int:
        """Index `messages` (just persisted, sequence order); the number of documents written.

        Failures are logged, not raised: the turn is stored, and compaction catches up.
        """
        documents = turn_documents(session_id, messages, self._clock())
        if not documents:
            return 0
        try:
            await self._write(tenant, documents, deadline)
        except Exception as exc:
            log.warning("turn index write for session %s failed (%s); compaction will re-index it",
                        session_id, type(exc).__name__)  # fmt: skip
            return 0
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
        number written. Raises on failure (the caller decides whether that matters)."""
        try:
            listing = await self._ov.ls(
                tenant, session_index_uri(session_id), node_limit=MAX_LISTED, deadline=deadline
            )
            present = {entry.uri.rsplit("/", 1)[-1] for entry in listing.entries}
        except BackendNotFound:
            present = set()
        messages = [IndexedMessage(t.sequence, t.message) for t in sorted(turns, key=lambda t: t.sequence)]
        missing = [
            d
            for d in turn_documents(session_id, messages, self._clock())
            if d.uri.rsplit("/", 1)[-1] not in present
        ]
        if missing:
            await self._write(tenant, missing, deadline)
        return len(missing)

    async def _write(self, tenant: Tenant, documents: Sequence[TurnDocument], deadline: float | None) -> None:
        operations = write_operations(documents)
        try:
            await self._batch(tenant, operations, deadline)
        except (BackendNotFound, BackendInvalidArgument):
            # First exchange of this user: the index folder does not exist yet.
            with contextlib.suppress(BackendConflict):  # another replica created it meanwhile
                await self._ov.mkdir(tenant, TURN_INDEX_ROOT, deadline=deadline)
            await self._batch(tenant, operations, deadline)

    async def _batch(
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
