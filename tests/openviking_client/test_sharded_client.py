"""A client over two shards (two real local HTTP servers): each tenant's calls, including the
provisioning of its key, go to its shard; tenant-less calls must name a shard."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.errors import BackendUnavailable
from shared.openviking import ApiKeyAuth, DevAuth, OpenVikingClient, ProvisioningUserKeys, Tenant
from shared.openviking.shards import Shard, ShardMap, UnroutableCall
from tests.openviking_client.conftest import FAST_RETRY
from tests.openviking_client.scripted_server import (
    Reply,
    ScriptedServer,
    closed_port,
    ok,
    running_scripted_server,
)

STATUS = "/api/v1/system/status"
TENANTS = [Tenant("acme", f"user{i}") for i in range(12)]


@pytest.fixture(scope="module")
def two_servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with running_scripted_server() as first, running_scripted_server() as second:
        yield first, second


@pytest.fixture
def servers(two_servers: tuple[ScriptedServer, ScriptedServer]) -> dict[str, ScriptedServer]:
    for server in two_servers:
        server.reset()
        server.script("GET", STATUS, ok({"initialized": True}))
        server.script("GET", "/health", Reply(200, {"status": "ok"}))
    return {"ov-0": two_servers[0], "ov-1": two_servers[1]}


def routing(servers: dict[str, ScriptedServer], pins: dict[str, str] | None = None) -> ShardMap:
    return ShardMap(tuple(Shard(n, s.base_url) for n, s in servers.items()), pins or {})


def users_seen(server: ScriptedServer) -> set[str]:
    return {r.headers["X-OpenViking-User"] for r in server.calls("GET", STATUS)}


async def test_each_tenant_is_served_by_its_shard_only(servers: dict[str, ScriptedServer]) -> None:
    shard_map = routing(servers)
    async with OpenVikingClient(shard_map, DevAuth()) as ov:
        for tenant in TENANTS:
            await ov.system_status(tenant)
    for name, server in servers.items():
        assert users_seen(server) == {t.user_id for t in TENANTS if shard_map.shard_for(t) == name}
    assert all(users_seen(server) for server in servers.values())  # both shards got tenants


async def test_a_pin_sends_the_tenant_to_the_pinned_shard(servers: dict[str, ScriptedServer]) -> None:
    tenant = TENANTS[0]
    hashed = routing(servers).shard_for(tenant)
    other = next(name for name in servers if name != hashed)
    async with OpenVikingClient(routing(servers, {"acme/user0": other}), DevAuth()) as ov:
        await ov.system_status(tenant)
    assert users_seen(servers[other]) == {"user0"}
    assert users_seen(servers[hashed]) == set()


async def test_calls_without_a_tenant_must_name_a_shard(servers: dict[str, ScriptedServer]) -> None:
    async with OpenVikingClient(routing(servers), DevAuth()) as ov:
        with pytest.raises(UnroutableCall, match=r"GET /health: .*shards ov-0, ov-1"):
            await ov.health()
        with pytest.raises(UnroutableCall, match="POST /api/v1/admin/accounts"):
            await ov.create_account("root", "acme", "admin")
        await ov.shard("ov-1").health()
    assert not servers["ov-0"].calls("GET", "/health")
    assert len(servers["ov-1"].calls("GET", "/health")) == 1


async def test_a_tenants_key_is_provisioned_on_its_own_shard(servers: dict[str, ScriptedServer]) -> None:
    for server in servers.values():
        server.script("POST", "/api/v1/admin/accounts", ok({"user_key": "k-admin"}))
        server.script("POST", "/api/v1/admin/accounts/acme/users", ok({"user_key": "k-user"}))
    shard_map = routing(servers)
    keys = ProvisioningUserKeys(root_api_key="root", seed="s")
    async with OpenVikingClient(shard_map, ApiKeyAuth(keys)) as ov:
        await ov.system_status(TENANTS[0])
    home = servers[shard_map.shard_for(TENANTS[0])]
    away = next(s for s in servers.values() if s is not home)
    assert [r.path for r in home.requests] == [
        "/api/v1/admin/accounts",
        "/api/v1/admin/accounts/acme/users",
        STATUS,
    ]
    assert away.requests == []


async def test_a_down_shard_fails_only_its_tenants_and_the_error_names_it(
    servers: dict[str, ScriptedServer],
) -> None:
    shard_map = ShardMap(
        (Shard("ov-0", servers["ov-0"].base_url), Shard("ov-dead", f"http://127.0.0.1:{closed_port()}"))
    )
    async with OpenVikingClient(shard_map, DevAuth(), retry=FAST_RETRY) as ov:
        for tenant in TENANTS:
            if shard_map.shard_for(tenant) == "ov-0":
                await ov.system_status(tenant)
            else:
                with pytest.raises(BackendUnavailable, match="OpenViking shard ov-dead unreachable"):
                    await ov.system_status(tenant)
