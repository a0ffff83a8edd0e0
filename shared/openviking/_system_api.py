"""Health, readiness, caller status and the admin (provisioning) endpoints."""

from __future__ import annotations

from typing import Any

from shared.errors import BackendError
from shared.openviking._base_api import ApiBase, segment
from shared.openviking.auth import ProvisionedKey
from shared.openviking.models._base import parse_result
from shared.openviking.models.system import Health, Readiness, SystemStatus
from shared.openviking.settings import CallKind
from shared.openviking.tenant import Tenant


def _provisioned(result: Any, account_id: str, user_id: str) -> ProvisionedKey:
    key = result.get("user_key") if isinstance(result, dict) else None
    if not isinstance(key, str) or not key:
        raise BackendError(
            "OpenViking returned no user_key (is the server in api_key mode?)", code="INVALID_RESPONSE"
        )
    return ProvisionedKey(account_id=account_id, user_id=user_id, user_key=key)


class SystemApi(ApiBase):
    async def health(self, *, tenant: Tenant | None = None, deadline: float | None = None) -> Health:
        """`GET /health` (200 once started). With a tenant, the server echoes who it is."""
        envelope = await self._request(
            "GET",
            "/health",
            tenant=tenant,
            kind=CallKind.PROBE,
            idempotent=True,
            deadline=deadline,
            enveloped=False,
        )
        return parse_result(Health, envelope.result, "health")

    async def ready(self, *, deadline: float | None = None) -> Readiness:
        """`GET /ready`; a 503 "not ready" answer is returned, not raised."""
        envelope = await self._request(
            "GET",
            "/ready",
            tenant=None,
            kind=CallKind.PROBE,
            idempotent=True,
            deadline=deadline,
            enveloped=False,
            ok_statuses=frozenset({503}),
        )
        return parse_result(Readiness, envelope.result, "ready")

    async def system_status(self, tenant: Tenant, *, deadline: float | None = None) -> SystemStatus:
        envelope = await self._request(
            "GET",
            "/api/v1/system/status",
            tenant=tenant,
            kind=CallKind.PROBE,
            idempotent=True,
            deadline=deadline,
        )
        return parse_result(SystemStatus, envelope.result, "system status")

    async def create_account(
        self,
        api_key: str,
        account_id: str,
        admin_user_id: str,
        *,
        seed: str | None = None,
        deadline: float | None = None,
    ) -> ProvisionedKey:
        """Create an account and its admin user (root key; api_key mode). 409 if it exists."""
        body: dict[str, Any] = {"account_id": account_id, "admin_user_id": admin_user_id}
        return await self._provision(
            "/api/v1/admin/accounts", body, api_key, account_id, admin_user_id, seed=seed, deadline=deadline
        )

    async def create_user(
        self,
        api_key: str,
        account_id: str,
        user_id: str,
        *,
        role: str = "user",
        seed: str | None = None,
        deadline: float | None = None,
    ) -> ProvisionedKey:
        """Register a user (root or account-admin key). 409 if it exists."""
        path = f"/api/v1/admin/accounts/{segment(account_id)}/users"
        body: dict[str, Any] = {"user_id": user_id, "role": role}
        return await self._provision(path, body, api_key, account_id, user_id, seed=seed, deadline=deadline)

    async def regenerate_user_key(
        self,
        api_key: str,
        account_id: str,
        user_id: str,
        *,
        seed: str | None = None,
        deadline: float | None = None,
    ) -> ProvisionedKey:
        """Replace a user's key; with the same `seed` the new key equals the old one."""
        path = f"/api/v1/admin/accounts/{segment(account_id)}/users/{segment(user_id)}/key"
        # With a seed the new key is deterministic, so a retry cannot hand out a different one.
        return await self._provision(
            path, {}, api_key, account_id, user_id, seed=seed, idempotent=seed is not None, deadline=deadline
        )

    async def _provision(
        self,
        path: str,
        body: dict[str, Any],
        api_key: str,
        account_id: str,
        user_id: str,
        *,
        seed: str | None,
        idempotent: bool = False,
        deadline: float | None,
    ) -> ProvisionedKey:
        """One admin POST that yields a user key (`seed` makes the key deterministic)."""
        if seed is not None:
            body = {**body, "seed": seed}
        envelope = await self._request(
            "POST",
            path,
            tenant=None,
            kind=CallKind.ADMIN,
            idempotent=idempotent,
            deadline=deadline,
            json=body or None,
            api_key=api_key,
        )
        return _provisioned(envelope.result, account_id, user_id)
