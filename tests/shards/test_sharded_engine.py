"""The engine over two real OpenViking shards: tenants spread over both, each tenant's data lives
on its shard only, and with one shard stopped only that shard's tenants fail (UNAVAILABLE /
degraded, naming the shard) while the other shard's tenants keep working with no errors.

The tests run in file order on one pair of shards; the last one stops `ov-1`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    common_pb2,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.config import load_settings
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from shared.runtime.main import start_host
from tests.support.shards import OpenVikingShards

pytestmark = pytest.mark.stack

ACCOUNT = "shardco"
USERS = [f"user{i}" for i in range(8)]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
async def engine(openviking_shards: OpenVikingShards) -> AsyncIterator[grpc.aio.Channel]:
    settings = load_settings(
        environ={},
        overrides={"openvikingShards": openviking_shards.env_value, "shutdownGraceSeconds": 1},
    )
    host = await start_host(settings, "all", port=0)
    async with grpc.aio.insecure_channel(host.address) as channel:
        yield channel
    await host.stop()


def identity(user: str, session: str = "") -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user, agent_id="main", session_id=session)


def user_message(msg_id: str, text: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=msg_id,
        role=common_pb2.MESSAGE_ROLE_USER,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
    )


def hello(user: str) -> common_pb2.ConversationMessage:
    return user_message("u1", "Hello from " + user)


def home(shards: OpenVikingShards, user: str) -> str:
    return shards.shard_map.shard_for(Tenant(ACCOUNT, user))


def fact(user: str) -> str:
    return f"The locker code of {user} is {sum(map(ord, user)) * 7}."


def test_tenants_spread_over_both_shards(openviking_shards: OpenVikingShards) -> None:
    assert {home(openviking_shards, u) for u in USERS} == {"ov-0", "ov-1"}


async def test_each_tenant_is_stored_on_its_shard_and_sees_only_its_own(
    openviking_shards: OpenVikingShards, engine: grpc.aio.Channel
) -> None:
    capture = capture_pb2_grpc.CaptureServiceStub(engine)
    assembly = assembly_pb2_grpc.AssemblyServiceStub(engine)
    stored = {}
    for user in USERS:
        await capture.AfterTurn(
            capture_pb2.AfterTurnRequest(identity=identity(user, "s1"), messages=[hello(user)])
        )
        memory = await capture.StoreMemory(
            capture_pb2.StoreMemoryRequest(identity=identity(user), text=fact(user))
        )
        stored[user] = memory.uri
    for name, stack in openviking_shards.stacks.items():
        async with OpenVikingClient(stack.openviking_url, DevAuth()) as shard:
            for user in USERS:
                sessions = await shard.list_sessions(Tenant(ACCOUNT, user))
                assert bool(sessions) == (home(openviking_shards, user) == name), (name, user)
    await asyncio.sleep(1.0)  # memories are findable shortly after the write
    for user in USERS:
        recalled = await assembly.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=identity(user), query="what is the locker code")
        )
        assert not recalled.degraded
        uris = [m.uri for m in recalled.memories]
        assert stored[user] in uris
        assert not set(uris) & {uri for other, uri in stored.items() if other != user}


async def health_of(channel: grpc.aio.Channel, name: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return (await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)).status


async def until_health(channel: grpc.aio.Channel, name: str, wanted: int, within: float = 30.0) -> None:
    give_up = time.monotonic() + within
    while (got := await health_of(channel, name)) != wanted:
        assert time.monotonic() < give_up, (name, got)
        await asyncio.sleep(0.2)


async def test_a_stopped_shard_fails_only_its_tenants(
    openviking_shards: OpenVikingShards, engine: grpc.aio.Channel
) -> None:
    capture = capture_pb2_grpc.CaptureServiceStub(engine)
    assembly = assembly_pb2_grpc.AssemblyServiceStub(engine)
    await until_health(engine, "openviking/ov-1", SERVING)
    openviking_shards.stop("ov-1")
    await until_health(engine, "openviking/ov-1", NOT_SERVING)
    assert await health_of(engine, "openviking/ov-0") == SERVING
    assert await health_of(engine, "contextengine.v1.CaptureService") == SERVING

    for user in USERS:
        still = user_message("u2", "Still there, " + user)
        after_turn = capture_pb2.AfterTurnRequest(
            identity=identity(user, "s1"), messages=[hello(user), still], pre_prompt_message_count=1
        )
        assemble = assembly_pb2.AssembleRequest(
            identity=identity(user, "s1"),
            messages=[hello(user), still],
            token_budget=4000,
            model="gpt-4o",
            prompt="what is my locker code",
        )
        if home(openviking_shards, user) == "ov-0":
            assert (await capture.AfterTurn(after_turn)).persisted_count == 1
            assembled = await assembly.Assemble(assemble)
            assert not assembled.packet.degraded, assembled.packet.degraded_reasons
            continue
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await capture.AfterTurn(after_turn)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "shard ov-1" in (refused.value.details() or "")
        assembled = await assembly.Assemble(assemble)
        assert assembled.packet.degraded
        assert any("shard ov-1" in reason for reason in assembled.packet.degraded_reasons)
