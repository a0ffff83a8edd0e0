"""The three services in one in-process host on the session's real OpenViking, for contract tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.e2e.host import Stubs, engine
from tests.support.stack import OpenVikingEndpoint

ENGINE_SETTINGS: dict[str, object] = {
    "timeoutMs": 60_000,
    "memoryExpandMaxResults": 25,
    "recentRawTurnCount": 8,
    "compactTurnThreshold": 100_000,
    "compactTokensAddedThreshold": 100_000_000,
    "compactIntervalMinutes": 100_000,
}
"""Triggers out of the way: each test compacts explicitly."""


@pytest.fixture(scope="module")
async def contract_engine(openviking: OpenVikingEndpoint) -> AsyncIterator[Stubs]:
    async with engine(baseUrl=openviking.base_url, **ENGINE_SETTINGS) as stubs:
        yield stubs
