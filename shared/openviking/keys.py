"""User key providers for `api_key` mode."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.errors import BackendConflict, BackendUnauthenticated
from shared.openviking.auth import AdminApi
from shared.openviking.tenant import Tenant


@dataclass(frozen=True, slots=True)
class StaticUserKeys:
    """Keys handed in up front (e.g. from a secret); an unknown tenant is unauthenticated."""

    keys: Mapping[Tenant, str]

    async def key_for(self, tenant: Tenant, admin: AdminApi, deadline: float | None) -> str:
        try:
            return self.keys[tenant]
        except KeyError:
            raise BackendUnauthenticated(
                f"no OpenViking user key for {tenant.account_id}/{tenant.user_id}",
                code="UNAUTHENTICATED",
            ) from None

    def forget(self, tenant: Tenant) -> None:
        return None

    def __repr__(self) -> str:
        return f"StaticUserKeys(<{len(self.keys)} keys>)"


@dataclass(slots=True)
class ProvisioningUserKeys:
    """Creates accounts and users through the admin API with the root key, on first use.

    Keys are derived from `seed` (per tenant, via HMAC), so every replica sharing the seed gets
    the same key for the same user: when the user already exists (another replica created it),
    the key is regenerated with the same seed, which yields the identical key. Keys are cached
    in memory only.
    """

    root_api_key: str
    """`server.root_api_key`; used only for `/api/v1/admin` calls."""
    seed: str
    """Shared secret from which per-user seeds are derived; identical on every replica."""
    account_admin_user_id: str = "context-engine-admin"
    """Admin user created with each new account (its key is not used)."""
    _cache: dict[Tenant, str] = field(default_factory=dict, init=False, repr=False)
    _locks: dict[Tenant, asyncio.Lock] = field(default_factory=dict, init=False, repr=False)

    def user_seed(self, tenant: Tenant) -> str:
        """The deterministic seed sent to OpenViking for this tenant."""
        message = f"{tenant.account_id}\0{tenant.user_id}".encode()
        return hmac.new(self.seed.encode(), message, hashlib.sha256).hexdigest()

    async def key_for(self, tenant: Tenant, admin: AdminApi, deadline: float | None) -> str:
        cached = self._cache.get(tenant)
        if cached is not None:
            return cached
        lock = self._locks.setdefault(tenant, asyncio.Lock())
        async with lock:
            cached = self._cache.get(tenant)
            if cached is None:
                cached = await self._provision(tenant, admin, deadline)
                self._cache[tenant] = cached
            return cached

    def forget(self, tenant: Tenant) -> None:
        self._cache.pop(tenant, None)

    async def _provision(self, tenant: Tenant, admin: AdminApi, deadline: float | None) -> str:
        seed = self.user_seed(tenant)
        if tenant.user_id == self.account_admin_user_id:
            raise BackendConflict(
                f"user id {tenant.user_id!r} is reserved for the account admin", code="ALREADY_EXISTS"
            )
        with contextlib.suppress(BackendConflict):  # another replica (or an earlier run) made it
            await admin.create_account(
                self.root_api_key,
                tenant.account_id,
                self.account_admin_user_id,
                seed=self.user_seed(Tenant(tenant.account_id, self.account_admin_user_id)),
                deadline=deadline,
            )
        try:
            created = await admin.create_user(
                self.root_api_key, tenant.account_id, tenant.user_id, seed=seed, deadline=deadline
            )
        except BackendConflict:
            created = await admin.regenerate_user_key(
                self.root_api_key, tenant.account_id, tenant.user_id, seed=seed, deadline=deadline
            )
        return created.user_key

    def __repr__(self) -> str:
        return f"ProvisioningUserKeys(root_api_key=***, seed=***, cached={len(self._cache)})"
