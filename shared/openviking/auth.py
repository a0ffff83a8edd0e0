"""How a call proves who it is: one strategy per OpenViking `server.auth_mode`.

Every strategy turns a `Tenant` into request headers at call time; nothing about identity is
stored process-wide.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from shared.openviking.tenant import Tenant

ACCOUNT_HEADER = "X-OpenViking-Account"
USER_HEADER = "X-OpenViking-User"
API_KEY_HEADER = "X-API-Key"


@dataclass(frozen=True, slots=True)
class ProvisionedKey:
    """A user key returned by the admin API."""

    account_id: str
    user_id: str
    user_key: str


class AdminApi(Protocol):
    """The admin calls a key provider may need (implemented by `OpenVikingClient`)."""

    async def create_account(
        self,
        api_key: str,
        account_id: str,
        admin_user_id: str,
        *,
        seed: str | None = None,
        deadline: float | None = None,
    ) -> ProvisionedKey: ...

    async def create_user(
        self,
        api_key: str,
        account_id: str,
        user_id: str,
        *,
        role: str = "user",
        seed: str | None = None,
        deadline: float | None = None,
    ) -> ProvisionedKey: ...

    async def regenerate_user_key(
        self,
        api_key: str,
        account_id: str,
        user_id: str,
        *,
        seed: str | None = None,
        deadline: float | None = None,
    ) -> ProvisionedKey: ...


class UserKeyProvider(Protocol):
    """Resolves the per-user key for a tenant in `api_key` mode."""

    async def key_for(self, tenant: Tenant, admin: AdminApi, deadline: float | None) -> str: ...

    def forget(self, tenant: Tenant) -> None:
        """Drop a cached key (called after the server rejected it with 401)."""


class AuthStrategy(Protocol):
    """Builds the auth/identity headers of one call."""

    async def headers_for(
        self, tenant: Tenant | None, admin: AdminApi, deadline: float | None
    ) -> Mapping[str, str]: ...

    def on_unauthenticated(self, tenant: Tenant) -> None:
        """Called when the server answered 401 for `tenant`."""


def _identity_headers(tenant: Tenant | None) -> dict[str, str]:
    if tenant is None:
        return {}
    return {ACCOUNT_HEADER: tenant.account_id, USER_HEADER: tenant.user_id}


@dataclass(frozen=True, slots=True)
class DevAuth:
    """`dev` mode: identity headers only (the server treats everyone as ROOT)."""

    async def headers_for(
        self, tenant: Tenant | None, admin: AdminApi, deadline: float | None
    ) -> Mapping[str, str]:
        return _identity_headers(tenant)

    def on_unauthenticated(self, tenant: Tenant) -> None:
        return None


@dataclass(frozen=True, slots=True)
class TrustedAuth:
    """`trusted` mode: the root key on every call plus the asserted identity headers."""

    root_api_key: str = ""
    """`server.root_api_key` of the OpenViking server."""

    async def headers_for(
        self, tenant: Tenant | None, admin: AdminApi, deadline: float | None
    ) -> Mapping[str, str]:
        return {API_KEY_HEADER: self.root_api_key, **_identity_headers(tenant)}

    def on_unauthenticated(self, tenant: Tenant) -> None:
        return None

    def __repr__(self) -> str:
        return "TrustedAuth(root_api_key=***)"


@dataclass(frozen=True, slots=True)
class ApiKeyAuth:
    """`api_key` mode: the tenant's own user key (identity headers would be ignored)."""

    keys: UserKeyProvider
    """Where user keys come from."""

    async def headers_for(
        self, tenant: Tenant | None, admin: AdminApi, deadline: float | None
    ) -> Mapping[str, str]:
        if tenant is None:
            return {}
        return {API_KEY_HEADER: await self.keys.key_for(tenant, admin, deadline)}

    def on_unauthenticated(self, tenant: Tenant) -> None:
        self.keys.forget(tenant)
