"""What an assembly replica derives from a tenant's stored documents, reused for a TTL.

Entries are grouped by tenant: `invalidate(tenant)` (a change announced in the same process,
`shared.domain.memory_changes`) drops all of a tenant's entries at once, and a load that was in
flight meanwhile is returned to its caller but not kept (it may predate the change). Replicas in
other processes hear nothing: there the TTL bounds how stale an entry can be.

A cache given a `stale` window answers with an entry past its TTL but within that window at once
and loads it again after the answer (`services.assembly.refreshes`): for what a host can see one
call late, so that a host asking once a minute does not wait for a load on every call.

A `get` given `revalidate` hands it the aged entry instead of loading from scratch: a conditional
load, which may keep what it can show did not change (the profile: `services.assembly.profile`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from services.assembly.refreshes import Refreshes
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache

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
        self._reloads: Refreshes[tuple[Tenant, K]] = Refreshes("cache entry")

    def invalidate(self, tenant: Tenant) -> None:
        self._tenants.pop(tenant)
        self._generations.put(tenant, (self._generations.get(tenant) or 0) + 1)

    async def get(
        self,
        tenant: Tenant,
        key: K,
        load: Callable[[], Awaitable[V]],
        *,
        revalidate: Callable[[V], Awaitable[V]] | None = None,
    ) -> V:
        """The entry within its TTL; else `load()`, or `revalidate(aged entry)` when given."""
        now = self._clock()
        entries = self._tenants.get(tenant)
        hit = entries.get(key) if entries is not None else None
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        again = load if hit is None or revalidate is None else functools.partial(revalidate, hit[1])
        if hit is not None and now - hit[0] < self._ttl + self._stale:
            self._reloads.start((tenant, key), lambda: self._load(tenant, key, again))
            return hit[1]
        return await self._load(tenant, key, again)

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

    async def aclose(self) -> None:
        """Stop the background loads still running (at shutdown, before the client closes)."""
        await self._reloads.aclose()
