"""`OpenVikingClient`: the only code that speaks HTTP to OpenViking."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import TypedDict

from shared.openviking._archive_files_api import ArchiveFilesApi
from shared.openviking._fs_api import FsApi
from shared.openviking._search_api import SearchApi
from shared.openviking._sessions_api import SessionsApi
from shared.openviking._system_api import SystemApi
from shared.openviking._tasks_api import TasksApi
from shared.openviking.auth import AuthStrategy
from shared.openviking.http import Middleware
from shared.openviking.settings import CallTimeouts, PoolLimits, RetryPolicy
from shared.openviking.shards import ShardMap, UnroutableCall
from shared.openviking.tenant import Tenant
from shared.openviking.transport import HeaderProvider, Transport


class _Options(TypedDict):
    timeouts: CallTimeouts
    retry: RetryPolicy
    pool: PoolLimits
    header_providers: Sequence[HeaderProvider]
    middlewares: Sequence[Middleware]
    rng: random.Random | None


class ShardApi(SystemApi):
    """One shard's own endpoint: its transport, probes and admin calls (a tenant-less call
    on a multi-shard client must name its shard: `client.shard(name).health()`)."""

    def __init__(self, name: str, base_url: str, auth: AuthStrategy, label: str, options: _Options) -> None:
        self.name = name
        self.transport = Transport(base_url, auth, self, label=label, **options)

    def _transport_for(self, tenant: Tenant | None, call: str) -> Transport:
        return self.transport


class OpenVikingClient(SystemApi, SessionsApi, TasksApi, SearchApi, ArchiveFilesApi, FsApi):
    """Async client over one HTTP connection pool per OpenViking shard; every method takes the
    `Tenant` it acts for, and goes to that tenant's shard (`shared.openviking.shards`).

    Every method accepts `deadline` (absolute `time.monotonic()`): the call's timeout is the
    default for its kind capped by the time left, and an expired deadline raises
    `BackendTimeout` without sending. Idempotent calls are retried with backoff and jitter on
    502/503 and connection errors within the deadline; appends and commits never are. Errors
    are `shared.errors.BackendError` subclasses carrying the HTTP status and OpenViking's code.
    A call without a tenant (probes, admin) on a client of several shards raises
    `UnroutableCall`; make it on one shard with `shard(name)`.
    """

    def __init__(
        self,
        base_url: str | ShardMap,
        auth: AuthStrategy,
        *,
        timeouts: CallTimeouts | None = None,
        retry: RetryPolicy | None = None,
        pool: PoolLimits | None = None,
        header_providers: Sequence[HeaderProvider] = (),
        middlewares: Sequence[Middleware] = (),
        rng: random.Random | None = None,
    ) -> None:
        """`base_url` is one server or a `ShardMap`; `header_providers` are called on every HTTP
        attempt (trace context, request ids); `middlewares` wrap every HTTP attempt of every
        shard (instrumentation or tests, `shared.openviking.http`). `pool` applies to each
        shard's connections."""
        self.shard_map = ShardMap.single(base_url) if isinstance(base_url, str) else base_url
        sharded = len(self.shard_map.shards) > 1
        self._shards: dict[str, ShardApi] = {}
        for shard in self.shard_map.shards:
            options = _Options(
                timeouts=timeouts or CallTimeouts(),
                retry=retry or RetryPolicy(),
                pool=pool or PoolLimits(),
                header_providers=header_providers,
                middlewares=middlewares,
                rng=rng,
            )
            label = f"OpenViking shard {shard.name}" if sharded else "OpenViking"
            self._shards[shard.name] = ShardApi(shard.name, shard.base_url, auth, label, options)

    @property
    def shards(self) -> Mapping[str, ShardApi]:
        """Every shard by name (one, `default`, for a single URL)."""
        return MappingProxyType(self._shards)

    def shard(self, name: str) -> ShardApi:
        return self._shards[name]

    def _transport_for(self, tenant: Tenant | None, call: str) -> Transport:
        if tenant is not None:
            return self._shards[self.shard_map.shard_for(tenant)].transport
        if len(self._shards) == 1:
            return next(iter(self._shards.values())).transport
        raise UnroutableCall(
            f"{call}: no tenant to route by across OpenViking shards "
            f"{', '.join(self._shards)}; call it on one shard (client.shard(name))"
        )

    async def aclose(self) -> None:
        for shard in self._shards.values():
            await shard.transport.aclose()

    async def __aenter__(self) -> OpenVikingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
