"""The host plugin's settings reach Assemble and recall per call (`SettingsOverrides`), on a real
in-process gRPC server against the real local OpenViking."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from contextengine.v1 import assembly_pb2, common_pb2
from grpc import aio

from shared.openviking import DevAuth, OpenVikingClient
from tests.assembly.conftest import assembly_stub
from tests.assembly.helpers import assistant, seed, unique_tenant, user
from tests.assembly.test_servicer import MEM, RECALL_SETTINGS, identity_of, seed_user
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack
PROMPT = "which text editor do I prefer for coding"


@pytest.fixture
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield client


async def test_recall_limit_auto_recall_and_bad_values_per_call(ov: OpenVikingClient) -> None:
    tenant = unique_tenant("settings")
    await seed_user(ov, tenant)
    await seed(
        ov,
        tenant,
        {
            f"{MEM}/entities/laptop.md": "User codes on a ThinkPad laptop with a text editor",
            f"{MEM}/events/switch.md": "User switched text editors for coding last spring",
            f"{MEM}/notes/dotfiles.md": "User keeps the text editor config for coding in dotfiles",
        },
    )
    host = [user("what is the capital of france"), assistant("Paris."), user(PROMPT)]

    def request(**overrides: object) -> assembly_pb2.AssembleRequest:
        return assembly_pb2.AssembleRequest(
            identity=identity_of(tenant),
            messages=host,
            prompt=PROMPT,
            overrides=common_pb2.SettingsOverrides(**overrides),  # type: ignore[arg-type]
        )

    async with assembly_stub(RECALL_SETTINGS, ov) as stub:
        default = await stub.Assemble(request())
        limited = await stub.Assemble(request(recall_limit=1))
        off = await stub.Assemble(request(auto_recall=False))
        recalled = await stub.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(
                identity=identity_of(tenant),
                query=PROMPT,
                overrides=common_pb2.SettingsOverrides(recall_limit=1),
            )
        )
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.Assemble(request(recall_limit=0))
    # auto recall asks OpenViking for recall_limit hits and leaves out those the profile shows
    assert len(limited.packet.recalled_memories) <= 1 < len(default.packet.recalled_memories)
    assert not off.packet.recalled_memories and off.packet.recall_skip_reason == "auto_recall_disabled"
    assert len(recalled.memories) == 1
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith("overrides.recall_limit:")
