"""A replica reuses a tenant's profile for the TTL, never a degraded one; past it, a conditional load
is handed the aged one."""

from __future__ import annotations

from services.assembly.profile import StableProfile, profile_cache
from shared.openviking.tenant import Tenant
from tests.assembly.helpers import ManualClock

ALICE = Tenant("acct", "alice")
BOB = Tenant("acct", "bob")
KEY = ("main", 1000, 500)


async def test_profile_is_reused_within_the_ttl_and_reloaded_after() -> None:
    clock = ManualClock(100.0)
    cache = profile_cache(ttl=30.0, clock=clock)
    loads: list[int] = []

    async def load() -> StableProfile:
        loads.append(1)
        return StableProfile(blocks=[f"[User Profile]\nversion {len(loads)}"])

    first = await cache.get(ALICE, KEY, load)
    clock.now += 29.0
    assert await cache.get(ALICE, KEY, load) is first and len(loads) == 1
    other = await cache.get(BOB, KEY, load)
    assert other is not first and len(loads) == 2
    clock.now += 2.0
    assert (await cache.get(ALICE, KEY, load)).blocks == ["[User Profile]\nversion 3"]


async def test_degraded_profiles_are_not_kept() -> None:
    cache = profile_cache(ttl=30.0, clock=ManualClock(100.0))
    loads: list[int] = []

    async def load() -> StableProfile:
        loads.append(1)
        return StableProfile(degraded_reasons=["profile.read: timed out"])

    await cache.get(ALICE, KEY, load)
    await cache.get(ALICE, KEY, load)
    assert len(loads) == 2


async def test_invalidate_drops_only_that_tenant_and_a_racing_load_is_not_kept() -> None:
    cache = profile_cache(ttl=30.0, clock=ManualClock(100.0))
    loads: list[str] = []

    async def load() -> StableProfile:
        loads.append("load")
        return StableProfile(blocks=[f"version {len(loads)}"])

    async def load_then_change() -> StableProfile:
        profile = await load()
        cache.invalidate(ALICE)  # a StoreMemory lands while this load is in flight
        return profile

    await cache.get(ALICE, KEY, load)
    await cache.get(BOB, KEY, load)
    cache.invalidate(ALICE)
    assert (await cache.get(ALICE, KEY, load_then_change)).blocks == ["version 3"]
    assert (await cache.get(ALICE, KEY, load)).blocks == ["version 4"]  # the raced load was not kept
    assert (await cache.get(ALICE, KEY, load)).blocks == ["version 4"]
    assert (await cache.get(BOB, KEY, load)).blocks == ["version 2"]


async def test_an_aged_profile_is_handed_to_revalidate_and_a_missing_one_is_loaded() -> None:
    clock = ManualClock(100.0)
    cache = profile_cache(ttl=30.0, clock=clock)
    calls: list[str] = []

    async def load() -> StableProfile:
        calls.append("load")
        return StableProfile(blocks=["loaded"])

    async def revalidate(earlier: StableProfile) -> StableProfile:
        calls.append(f"revalidate {earlier.blocks[0]}")
        return StableProfile(blocks=[f"{earlier.blocks[0]}, checked"])

    assert (await cache.get(ALICE, KEY, load, revalidate=revalidate)).blocks == ["loaded"]
    clock.now += 31.0
    assert (await cache.get(ALICE, KEY, load, revalidate=revalidate)).blocks == ["loaded, checked"]
    assert (await cache.get(ALICE, KEY, load, revalidate=revalidate)).blocks == ["loaded, checked"]
    cache.invalidate(ALICE)  # a change announced in the process: nothing to revalidate, loaded
    assert (await cache.get(ALICE, KEY, load, revalidate=revalidate)).blocks == ["loaded"]
    assert calls == ["load", "revalidate loaded", "load"]
