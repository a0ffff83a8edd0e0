"""The directory listing's cache on the real OpenViking, clock-driven: listed first when never
listed or too old, shown as it was while listed again once past its TTL."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from services.assembly.directory_listing import (
    DIRECTORY_STALE_SECONDS,
    DIRECTORY_TTL_SECONDS,
    directory_cache,
    list_directory,
)
from shared.openviking import OpenVikingClient, Tenant
from tests.assembly.helpers import ManualClock, RequestRecorder, polled, seed

RESOURCES = "viking://~/resources"


@pytest.mark.stack
async def test_a_listing_past_its_ttl_is_shown_as_it_was_while_it_is_listed_again(
    recorded_client: tuple[OpenVikingClient, RequestRecorder],
) -> None:
    ov, recorder = recorded_client
    tenant = Tenant(f"dir-{uuid.uuid4().hex[:8]}", "alice")
    await seed(ov, tenant, {f"{RESOURCES}/trip-plan.md": "Lisbon in May: flights, hotel, a day in Sintra."})
    clock = ManualClock(1_000.0)
    cache = directory_cache(clock)

    async def names() -> set[str]:
        entries = await cache.get(tenant, "", lambda: list_directory(ov, tenant))
        return {e.uri.rsplit("/", 1)[-1] for e in entries if e.kind == "resources"}

    def listings() -> int:
        return sum(1 for r in recorder.requests if r.path == "/api/v1/fs/ls")

    recorder.requests.clear()
    assert await names() == {"trip-plan.md"}
    folders = listings()
    assert folders == 3  # never listed: listed first (resources, memories, the skill space)

    await seed(ov, tenant, {f"{RESOURCES}/budget.md": "Budget for the Lisbon trip: 1,800 euros."})
    clock.now += DIRECTORY_TTL_SECONDS - 1
    assert await names() == {"trip-plan.md"} and listings() == folders  # current: as it was

    clock.now += 2  # past its TTL: shown as it was, listed again beside it, once
    first, second = await asyncio.gather(names(), names())
    assert first == second == {"trip-plan.md"}
    assert await polled(names, lambda n: "budget.md" in n) == {"trip-plan.md", "budget.md"}
    assert await polled(names, lambda _: listings() == 2 * folders) == {"trip-plan.md", "budget.md"}

    await seed(ov, tenant, {f"{RESOURCES}/visa.md": "No visa needed for Portugal."})
    clock.now += DIRECTORY_TTL_SECONDS + DIRECTORY_STALE_SECONDS  # too old to show: listed first
    assert await names() == {"trip-plan.md", "budget.md", "visa.md"}
    assert listings() == 3 * folders

    # A change announced in the process drops the listing at once: listed first again.
    cache.invalidate(tenant)
    assert await names() == {"trip-plan.md", "budget.md", "visa.md"} and listings() == 4 * folders
    await cache.aclose()
