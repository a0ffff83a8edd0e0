"""`OpenVikingClient`: the only code that speaks HTTP to OpenViking."""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import TracebackType

import httpx

from shared.openviking._archive_files_api import ArchiveFilesApi
from shared.openviking._fs_api import FsApi
from shared.openviking._search_api import SearchApi
from shared.openviking._sessions_api import SessionsApi
from shared.openviking._system_api import SystemApi
from shared.openviking._tasks_api import TasksApi
from shared.openviking.auth import AuthStrategy
from shared.openviking.settings import CallTimeouts, PoolLimits, RetryPolicy
from shared.openviking.transport import HeaderProvider, Transport


class OpenVikingClient(SystemApi, SessionsApi, TasksApi, SearchApi, ArchiveFilesApi, FsApi):
    """Async client over one `httpx.AsyncClient`; every method takes the `Tenant` it acts for.

    Every method accepts `deadline` (absolute `time.monotonic()`): the call's timeout is the
    default for its kind capped by the time left, and an expired deadline raises
    `BackendTimeout` without sending. Idempotent calls are retried with backoff and jitter on
    502/503 and connection errors within the deadline; appends and commits never are. Errors
    are `shared.errors.BackendError` subclasses carrying the HTTP status and OpenViking's code.
    """

    def __init__(
        self,
        base_url: str,
        auth: AuthStrategy,
        *,
        timeouts: CallTimeouts | None = None,
        retry: RetryPolicy | None = None,
        pool: PoolLimits | None = None,
        header_providers: Sequence[HeaderProvider] = (),
        http_transport: httpx.AsyncBaseTransport | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`header_providers` are called on every HTTP attempt (trace context, request ids);
        `http_transport` replaces httpx's network transport (instrumentation or tests)."""
        self._transport = Transport(
            base_url,
            auth,
            self,
            timeouts=timeouts or CallTimeouts(),
            retry=retry or RetryPolicy(),
            pool=pool or PoolLimits(),
            header_providers=header_providers,
            http_transport=http_transport,
            rng=rng,
        )

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> OpenVikingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
