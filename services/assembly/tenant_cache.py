"""What an assembly replica derives from a tenant's stored documents, reused for a TTL.

Entries are grouped by tenant: `invalidate(tenant)` (a change announced in the same process,
`shared.domain.memory_changes`) drops all of a tenant's entries at once, and a load that was in
flight meanwhile is returned to its caller but not kept (it may predate the change). Replicas in
other processes hear nothing: there the TTL bounds how stale an entry can be.

A cache given a `stale` window answers with an entry past its TTL but within that window at once
and loads it again in the background once the call that asked has been answered
(stale-while-revalidate, one load per entry at a time): for what a host can see one call late,
so that a host asking once a minute does not wait for a load on every call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from shared.openviking.tenant import Tenant
from shared.runtime.answer_first import after_answer
from shared.sized_cache import SizedCache

log = logging.getLogger(__name__)

MAX_CACHED_TENANTS = 10_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TenantCache(Generic[K, V]):
    """Values by (tenant, key) for `ttl` seconds, then (with `stale`) for `stale` seconds more
    while loaded again in the background; values `keep` rejects (degraded) are not kept."""

    def __init__(
        self,
        ttl: float,
        *,
        stale: float = 0.0,
        keep: Callable[[V], bool] = lambda _: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._stale = stale
        self._keep = keep
        self._clock = clock
        self._tenants: SizedCache[Tenant, dict[K, tuple[float, V]]] = SizedCache(MAX_CACHED_TENANTS)
        self._generations: SizedCache[Tenant, int] = SizedCache(MAX_CACHED_TENANTS)
        """Invalidations per tenant, to tell a load that raced one."""
        self._reloading: dict[tuple[Tenant, K], asyncio.Task[None]] = {}

    def invalidate(self, tenant: Tenant) -> None:
        self._tenants.pop(tenant)
        self._generations.put(tenant, (self._generations.get(tenant) or 0) + 1)

    async def get(self, tenant: Tenant, key: K, load: Callable[[], Awaitable[V]]) -> V:
        now = self._clock()
        entries = self._tenants.get(tenant)
        hit = entries.get(key) if entries is not None else None
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        if hit is not None and now - hit[0] < self._ttl + self._stale:
            self._reload(tenant, key, load)
            return hit[1]
        return await self._load(tenant, key, load)

    async def _load(self, tenant: Tenant, key: K, load: Callable[[], Awaitable[V]]) -> V:
        now = self._clock()
        generation = self._generations.get(tenant)
        value = await load()
        if self._keep(value) and self._generations.get(tenant) == generation:
            entries = self._tenants.get(tenant)
            if entries is None:
                entries = {}
                self._tenants.put(tenant, entries)
            entries[key] = (now, value)
        return value

    def _reload(self, tenant: Tenant, key: K, load: Callable[[], Awaitable[V]]) -> None:
        """Load the entry again once the call is answered; a failed load leaves it as it was."""
        if (tenant, key) in self._reloading:
            return

        async def reload() -> None:
            try:
                await after_answer()
                await self._load(tenant, key, load)
            except Exception as exc:  # the stale entry stays; the next call tries again
                log.info("%s not loaded again: %s: %s", key, type(exc).__name__, exc)
            finally:
                del self._reloading[(tenant, key)]

        self._reloading[(tenant, key)] = asyncio.create_task(reload())

    async def aclose(self) -> None:
        """Stop the background loads still running (at shutdown, before the client closes)."""
        tasks = list(self._reloading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
