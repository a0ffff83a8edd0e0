"""The profile loaded again past its TTL, on the real OpenViking: profile.md is read every time, the
preferences' `find` is kept while their listing vouches for it and sent again once it changed."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from services.assembly.profile import (
    PREFERENCES_SETTLE_SECONDS,
    PREFERENCES_URI,
    PROFILE_URI,
    StableProfile,
    load_stable_profile,
)
from shared.openviking import OpenVikingClient
from shared.tokens import TokenCounter
from tests.assembly.helpers import RequestRecorder, seed, unique_tenant

COUNTER = TokenCounter("o200k_base")
LATER = PREFERENCES_SETTLE_SECONDS + 60
"""Seconds past the seeding at which every seeded preference is settled."""


@dataclass
class Profiles:
    ov: OpenVikingClient
    recorder: RequestRecorder

    async def load(self, earlier: StableProfile | None, *, at: float) -> StableProfile:
        self.recorder.requests.clear()
        return await load_stable_profile(
            self.ov,
            self.tenant,
            "main",
            COUNTER,
            max_tokens=1000,
            max_item_chars=500,
            deadline=time.monotonic() + 30,
            earlier=earlier,
            now=lambda: at,
        )

    def finds(self) -> int:
        return len(self.recorder.finds())

    def __post_init__(self) -> None:
        self.tenant = unique_tenant("prefs")


@pytest.fixture
def profiles(recorded_client: tuple[OpenVikingClient, RequestRecorder]) -> Profiles:
    return Profiles(*recorded_client)


def text(profile: StableProfile) -> str:
    return "\n".join(profile.blocks)


@pytest.mark.stack
async def test_unchanged_preferences_are_not_found_again_and_a_change_is(profiles: Profiles) -> None:
    tenant = profiles.tenant
    await seed(
        profiles.ov,
        tenant,
        {
            PROFILE_URI: "Name: Ana. Works on the billing migration.",
            f"{PREFERENCES_URI}/drinks/tea.md": "Ana prefers green tea in the afternoon.",
            f"{PREFERENCES_URI}/code/review.md": "Ana wants code reviews before noon.",
        },
    )
    settled = time.time() + LATER
    first = await profiles.load(None, at=settled)
    assert "green tea" in text(first) and "before noon" in text(first) and "billing" in text(first)
    assert profiles.finds() == 1
    assert first.preferences is not None and first.preferences.version is not None

    again = await profiles.load(first, at=settled)  # nothing changed: listed, not found again
    assert profiles.finds() == 0 and text(again) == text(first)
    assert {r.path for r in profiles.recorder.requests} == {"/api/v1/fs/ls", "/api/v1/content/read"}

    await seed(profiles.ov, tenant, {PROFILE_URI: "Name: Ana. Now leads the payments team."})
    edited = await profiles.load(again, at=settled)  # profile.md is read every time
    assert "payments team" in text(edited) and "billing" not in text(edited) and profiles.finds() == 0

    await seed(profiles.ov, tenant, {f"{PREFERENCES_URI}/desk/standing.md": "Ana works at a standing desk."})
    added = await profiles.load(edited, at=time.time() + LATER)  # a new entry: found again
    assert profiles.finds() == 1 and "standing desk" in text(added)

    await profiles.ov.rm(tenant, f"{PREFERENCES_URI}/drinks/tea.md")  # forgotten through another replica
    forgotten = await profiles.load(added, at=time.time() + LATER)
    assert profiles.finds() == 1 and "green tea" not in text(forgotten) and "standing desk" in text(forgotten)


@pytest.mark.stack
async def test_a_listing_with_a_recent_write_vouches_for_nothing(profiles: Profiles) -> None:
    await seed(profiles.ov, profiles.tenant, {f"{PREFERENCES_URI}/food/spicy.md": "Ana likes spicy food."})
    fresh = await profiles.load(None, at=time.time())  # the write may not be embedded yet
    assert fresh.preferences is not None and fresh.preferences.version is None
    again = await profiles.load(fresh, at=time.time())
    assert profiles.finds() == 1 and "spicy" in text(again)
    assert again.preferences is not None and again.preferences.version is None
    settled = await profiles.load(again, at=time.time() + LATER)
    assert profiles.finds() == 1 and settled.preferences is not None and settled.preferences.version
    assert (await profiles.load(settled, at=time.time() + LATER)).blocks == settled.blocks
    assert profiles.finds() == 0


@pytest.mark.stack
async def test_a_user_without_preferences_is_listed_not_found_again(profiles: Profiles) -> None:
    first = await profiles.load(None, at=time.time())
    assert first.blocks == [] and first.preferences is not None and first.preferences.version == frozenset()
    again = await profiles.load(first, at=time.time())
    assert again.blocks == [] and profiles.finds() == 0 and not again.degraded_reasons
