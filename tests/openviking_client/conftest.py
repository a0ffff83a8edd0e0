from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from shared.openviking import DevAuth, OpenVikingClient, RetryPolicy, Tenant
from tests.openviking_client.scripted_server import ScriptedServer, running_scripted_server


@pytest.fixture(scope="module")
def scripted_server() -> Iterator[ScriptedServer]:
    with running_scripted_server() as server:
        yield server


@pytest.fixture
def scripted(scripted_server: ScriptedServer) -> ScriptedServer:
    scripted_server.reset()
    return scripted_server


FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)
TENANT = Tenant("acme", "alice")


@pytest.fixture
async def client(scripted: ScriptedServer) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(scripted.base_url, DevAuth(), retry=FAST_RETRY) as ov:
        yield ov
