"""`TenantCache`'s stale window (`services.assembly.refreshes`): a failed background load keeps
what was shown, one load per entry at a time, shutdown stops what still runs."""

from __future__ import annotations

import asyncio

from services.assembly.tenant_cache import TenantCache
from shared.openviking.tenant import Tenant
from tests.assembly.helpers import ManualClock

TENANT = Tenant("acct", "alice")


class Loads:
    """Loads that answer in turn from `answers` (an exception is raised), counting the calls."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.called = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self) -> str:
        self.calls += 1
        self.called.set()
        await self.release.wait()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def _settled(loads: Loads, calls: int) -> None:
    """Wait until `calls` loads have started, then let the running one finish if released."""
    async with asyncio.timeout(5):
        while loads.calls < calls:
            loads.called.clear()
            await loads.called.wait()
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_failed_background_load_keeps_what_was_shown_and_the_next_call_tries_again() -> None:
    clock = ManualClock()
    cache: TenantCache[str, str] = TenantCache(10, stale=100, clock=clock)
    loads = Loads("v1", ConnectionError("down"), "v2")
    assert await cache.get(TENANT, "k", loads) == "v1"
    clock.now = 11
    assert await cache.get(TENANT, "k", loads) == "v1"
    await _settled(loads, 2)  # the load failed
    assert await cache.get(TENANT, "k", loads) == "v1"  # still shown; loaded again
    await _settled(loads, 3)
    assert await cache.get(TENANT, "k", loads) == "v2" and loads.calls == 3


async def test_one_background_load_per_entry_and_shutdown_stops_it() -> None:
    clock = ManualClock()
    cache: TenantCache[str, str] = TenantCache(10, stale=100, clock=clock)
    loads = Loads("v1", "v2")
    assert await cache.get(TENANT, "k", loads) == "v1"
    clock.now = 11
    loads.release.clear()  # the background load hangs
    answers = await asyncio.gather(*(cache.get(TENANT, "k", loads) for _ in range(5)))
    assert answers == ["v1"] * 5
    await _settled(loads, 2)
    assert loads.calls == 2
    await cache.aclose()
    loads.release.set()
    assert await cache.get(TENANT, "k", loads) == "v1"  # the stopped load changed nothing
    await _settled(loads, 3)  # and the next call starts one again
    assert await cache.get(TENANT, "k", loads) == "v2"


async def test_without_a_stale_window_an_aged_entry_is_loaded_before_the_answer() -> None:
    clock = ManualClock()
    cache: TenantCache[str, str] = TenantCache(10, clock=clock)
    loads = Loads("v1", "v2")
    assert await cache.get(TENANT, "k", loads) == "v1"
    clock.now = 11
    assert await cache.get(TENANT, "k", loads) == "v2"
