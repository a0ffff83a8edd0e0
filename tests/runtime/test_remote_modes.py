"""Remote mode: the engine against OpenViking in `api_key` and `trusted` auth, with the tenant
taken from each request (never a process-wide identity)."""

from __future__ import annotations

import uuid
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

from shared.config import load_settings
from shared.runtime.main import start_host
from tests.support.stack import RemoteOpenViking

pytestmark = pytest.mark.stack


@pytest.fixture(params=["openviking_api_key", "openviking_trusted"])
async def remote_engine(request: pytest.FixtureRequest) -> AsyncIterator[grpc.aio.Channel]:
    server: RemoteOpenViking = request.getfixturevalue(request.param)
    settings = load_settings(
        environ={},
        overrides={
            "mode": "remote",
            "baseUrl": server.base_url,
            "apiKey": server.root_api_key,
            "openvikingAuthMode": server.auth_mode,
            "shutdownGraceSeconds": 1,
        },
    )
    host = await start_host(settings, "all", port=0)
    async with grpc.aio.insecure_channel(host.address) as channel:
        yield channel
    await host.stop()


def _identity(user: str, session: str = "") -> common_pb2.Identity:
    return common_pb2.Identity(account_id="remote-acme", user_id=user, agent_id="main", session_id=session)


async def test_each_request_acts_as_its_own_tenant(remote_engine: grpc.aio.Channel) -> None:
    capture = capture_pb2_grpc.CaptureServiceStub(remote_engine)
    assembly = assembly_pb2_grpc.AssemblyServiceStub(remote_engine)
    alice, bob = f"alice-{uuid.uuid4().hex[:6]}", f"bob-{uuid.uuid4().hex[:6]}"
    fact = "Project Heron deploys to the Frankfurt region every Tuesday."
    stored = await capture.StoreMemory(capture_pb2.StoreMemoryRequest(identity=_identity(alice), text=fact))
    assert f"/user/{alice}/" in stored.uri

    query = "where does project Heron deploy"
    for_alice = await assembly.RecallMemories(
        assembly_pb2.RecallMemoriesRequest(identity=_identity(alice), query=query)
    )
    assert not for_alice.degraded
    assert [m.uri for m in for_alice.memories] == [stored.uri]
    for_bob = await assembly.RecallMemories(
        assembly_pb2.RecallMemoriesRequest(identity=_identity(bob), query=query)
    )
    assert not for_bob.degraded
    assert stored.uri not in [m.uri for m in for_bob.memories]

    user = common_pb2.ConversationMessage(
        id="u1",
        role=common_pb2.MESSAGE_ROLE_USER,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text="Heron goes out on Tuesday."))],
    )
    turn = await capture.AfterTurn(
        capture_pb2.AfterTurnRequest(identity=_identity(alice, "remote-s1"), messages=[user])
    )
    assert turn.persisted_count == 1


async def test_forgetting_another_tenants_memory_is_refused(remote_engine: grpc.aio.Channel) -> None:
    capture = capture_pb2_grpc.CaptureServiceStub(remote_engine)
    alice, mallory = f"alice-{uuid.uuid4().hex[:6]}", f"mallory-{uuid.uuid4().hex[:6]}"
    stored = await capture.StoreMemory(
        capture_pb2.StoreMemoryRequest(identity=_identity(alice), text="Alice's locker code is 4711.")
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await capture.ForgetMemory(
            capture_pb2.ForgetMemoryRequest(identity=_identity(mallory), uri=stored.uri)
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
