"""Starting background compactions on CompactionService (design §3.2 step 8)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2, compaction_pb2_grpc
from grpc import aio

from shared.domain.identity import RequestIdentity

COMPACT_CALL_TIMEOUT_SECONDS = 5.0
"""A background Compact only runs phase 1 (the archive) before answering."""


def identity_message(identity: RequestIdentity) -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=identity.tenant.account_id,
        user_id=identity.tenant.user_id,
        agent_id=identity.agent_id,
        session_id=identity.session_id,
        session_key=identity.session_key,
    )


class CompactionStarter:
    """One lazily opened channel to CompactionService; `start` returns the pending checkpoint."""

    def __init__(
        self,
        target: Callable[[], str],
        interceptors: Sequence[aio.ClientInterceptor] = (),
        *,
        timeout: float = COMPACT_CALL_TIMEOUT_SECONDS,
    ) -> None:
        self._target = target
        self._interceptors = list(interceptors)
        self._timeout = timeout
        self._channel: aio.Channel | None = None
        self._stub: compaction_pb2_grpc.CompactionServiceAsyncStub | None = None

    def _compaction(self) -> compaction_pb2_grpc.CompactionServiceAsyncStub:
        if self._stub is None:
            self._channel = aio.insecure_channel(self._target(), interceptors=self._interceptors or None)
            self._stub = compaction_pb2_grpc.CompactionServiceStub(self._channel)
        return self._stub

    async def start(
        self,
        identity: RequestIdentity,
        trigger: checkpoint_pb2.CompactionTrigger.ValueType,
        *,
        token_budget: int = 0,
        current_tokens: int = 0,
        model: str = "",
        call_timeout: float | None = None,
    ) -> compaction_pb2.CompactResponse:
        """Ask for a background compaction; raises `grpc.aio.AioRpcError` on failure."""
        request = compaction_pb2.CompactRequest(
            identity=identity_message(identity),
            token_budget=token_budget,
            background=True,
            trigger=trigger,
            current_token_count=current_tokens,
            model=model,
        )
        response: compaction_pb2.CompactResponse = await self._compaction().Compact(
            request, timeout=call_timeout or self._timeout, wait_for_ready=False
        )
        return response

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stub = None
