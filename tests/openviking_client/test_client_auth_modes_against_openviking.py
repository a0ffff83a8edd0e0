"""Auth modes against a real OpenViking: api_key provisioning and trusted-mode isolation.

Needs servers in those modes: fixtures `openviking_api_key` / `openviking_trusted` exposing
`.base_url` and `.root_api_key`. The shared stack does not offer them yet, so these skip
unless a conftest provides them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shared.errors import BackendNotFound, BackendPermissionDenied, BackendUnauthenticated
from shared.openviking import (
    ApiKeyAuth,
    NewMessage,
    OpenVikingClient,
    ProvisioningUserKeys,
    Tenant,
    TrustedAuth,
)

pytestmark = pytest.mark.stack


def _server(request: pytest.FixtureRequest, name: str) -> Any:
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        pytest.skip(f"no `{name}` fixture in this test stack")


async def test_provisioned_user_keys_work_and_are_reproducible(request: pytest.FixtureRequest) -> None:
    server = _server(request, "openviking_api_key")
    tenant = Tenant(f"acct-{uuid.uuid4().hex[:8]}", "alice")
    first = ProvisioningUserKeys(root_api_key=server.root_api_key, seed="replica-shared-seed")
    async with OpenVikingClient(server.base_url, ApiKeyAuth(first)) as ov:
        status = await ov.system_status(tenant)
        assert status.user == "alice"
        await ov.add_message(tenant, "s1", NewMessage(role="user", content="hello"))
        key = await first.key_for(tenant, ov, None)

    # a second replica with the same seed gets the same key (user exists -> regenerate, same key)
    second = ProvisioningUserKeys(root_api_key=server.root_api_key, seed="replica-shared-seed")
    async with OpenVikingClient(server.base_url, ApiKeyAuth(second)) as ov:
        assert await second.key_for(tenant, ov, None) == key
        assert (await ov.get_session(tenant, "s1")).message_count == 1
    # and the first replica's cached key still works
    async with OpenVikingClient(server.base_url, ApiKeyAuth(first)) as ov:
        assert (await ov.get_session(tenant, "s1")).message_count == 1


async def test_wrong_root_key_is_unauthenticated(request: pytest.FixtureRequest) -> None:
    server = _server(request, "openviking_api_key")
    keys = ProvisioningUserKeys(root_api_key="not-the-root-key", seed="s")
    async with OpenVikingClient(server.base_url, ApiKeyAuth(keys)) as ov:
        with pytest.raises(BackendUnauthenticated) as raised:
            await ov.system_status(Tenant("acct-x", "alice"))
    assert raised.value.http_status == 401


async def test_trusted_mode_keeps_users_apart(request: pytest.FixtureRequest) -> None:
    server = _server(request, "openviking_trusted")
    account = f"acct-{uuid.uuid4().hex[:8]}"
    alice, bob = Tenant(account, "alice"), Tenant(account, "bob")
    async with OpenVikingClient(server.base_url, TrustedAuth(server.root_api_key)) as ov:
        await ov.add_message(alice, "private", NewMessage(role="user", content="alice only"))
        with pytest.raises(BackendNotFound):
            await ov.get_session(bob, "private")
        with pytest.raises(BackendPermissionDenied) as raised:
            await ov.find(bob, "anything", target_uri="viking://user/alice/memories")
        assert (raised.value.http_status, raised.value.code) == (403, "PERMISSION_DENIED")
