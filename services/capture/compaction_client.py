"""Telling CompactionService about hand-offs (docs/design.md §3.2 step 8).

Capture records a compaction in the stream state itself (`shared.domain.handoff`), so the
request is durable before AfterTurn returns and no turn waits for compaction. The nudge - a
`Compact(resume_only)` that makes a compaction replica own the stream's hand-offs, or a direct
call when CompactionService runs in this process - runs in a task of this replica, off the
turn's path; if it is lost (compaction down, this replica killed), the compaction sweep or the
next call touching the stream picks the hand-off up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

import grpc
from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2, compaction_pb2_grpc
from grpc import aio

from shared.domain.identity import RequestIdentity
from shared.runtime.answer_first import after_answer
from shared.runtime.context import InProcess

log = logging.getLogger(__name__)

NUDGE_CALL_TIMEOUT_SECONDS = 5.0
"""A nudge only makes a compaction replica own the hand-off (two small writes)."""
NUDGE_ATTEMPTS = 3
RENUDGE_SECONDS = 10.0
"""A stream whose hand-off is still in flight is nudged again at most this often."""
AFTER_WAIT_SECONDS = 10.0
"""Longest a nudge waits for the user's held turn-index writes before it goes out anyway."""


def identity_message(identity: RequestIdentity) -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=identity.tenant.account_id,
        user_id=identity.tenant.user_id,
        agent_id=identity.agent_id,
        session_id=identity.session_id,
        session_key=identity.session_key,
    )


class CompactionNudger:
    """One lazily opened channel to CompactionService; nudges run in tasks of this replica."""

    def __init__(
        self,
        target: Callable[[], str],
        interceptors: Sequence[aio.ClientInterceptor] = (),
        *,
        local: InProcess | None = None,
        call_timeout: float = NUDGE_CALL_TIMEOUT_SECONDS,
    ) -> None:
        self._local = local
        self._target = target
        self._interceptors = list(interceptors)
        self._call_timeout = call_timeout
        self._channel: aio.Channel | None = None
        self._stub: compaction_pb2_grpc.CompactionServiceAsyncStub | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._last: dict[str, float] = {}

    def _compaction(self) -> compaction_pb2_grpc.CompactionServiceAsyncStub:
        if self._stub is None:
            self._channel = aio.insecure_channel(self._target(), interceptors=self._interceptors or None)
            self._stub = compaction_pb2_grpc.CompactionServiceStub(self._channel)
        return self._stub

    def nudge(
        self,
        identity: RequestIdentity,
        trigger: checkpoint_pb2.CompactionTrigger.ValueType,
        *,
        again: bool = False,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Ask, in the background, for the stream's hand-offs to be owned, once `after()` is done
        (at most `AFTER_WAIT_SECONDS`). With `again` (an old hand-off seen in flight), at most
        once per `RENUDGE_SECONDS` per stream."""
        now = time.monotonic()
        if again and now - self._last.get(identity.buffer_key, -RENUDGE_SECONDS) < RENUDGE_SECONDS:
            return
        self._last[identity.buffer_key] = now
        task = asyncio.create_task(self._send(identity, trigger, after), name=f"nudge-{identity.buffer_key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(
        self,
        identity: RequestIdentity,
        trigger: checkpoint_pb2.CompactionTrigger.ValueType,
        after: Callable[[], Awaitable[None]] | None,
    ) -> None:
        await after_answer()  # the hand-off is stored: the turn's caller goes first
        if after is not None:
            with contextlib.suppress(Exception):  # late or failed: compaction indexes what is missing
                await asyncio.wait_for(after(), AFTER_WAIT_SECONDS)
        if self._local is not None and self._local.own_hand_offs is not None:
            try:  # CompactionService runs in this process: no hop, and it works while draining
                await asyncio.wait_for(self._local.own_hand_offs(identity), self._call_timeout)
            except Exception as exc:  # the sweep or the next call touching the stream resumes it
                log.warning("compaction of %s not owned yet: %s", identity.buffer_key, exc)
            return
        request = compaction_pb2.CompactRequest(
            identity=identity_message(identity), background=True, trigger=trigger, resume_only=True
        )
        for attempt in range(1, NUDGE_ATTEMPTS + 1):
            try:
                await self._compaction().Compact(request, timeout=self._call_timeout, wait_for_ready=False)
                return
            except grpc.aio.AioRpcError as exc:
                if attempt == NUDGE_ATTEMPTS:
                    log.warning(
                        "compaction of %s not nudged (%s); the compaction sweep resumes it",
                        identity.buffer_key,
                        exc.code().name,
                    )
                    return
                await asyncio.sleep(0.2 * attempt)

    @property
    def pending(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for the nudges in flight (bound it with a timeout)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None
