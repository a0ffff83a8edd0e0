"""The stable profile: `profile.md` plus the user's preference memories, bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from services.assembly.candidates import agent_tag, merge_candidates
from services.assembly.folder_versions import folder_versions
from services.assembly.memory_rules import memory_line, truncate_content
from services.assembly.ports import AssemblyBackend, MemorySearch
from services.assembly.recall import USER_MEMORIES_URI, bounded, describe_failure
from services.assembly.tenant_cache import TenantCache
from shared.domain.turn_index_folders import FolderLister
from shared.errors import BackendNotFound
from shared.openviking.mod_times import settled
from shared.openviking.models.search import FindResult
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

PROFILE_URI = f"{USER_MEMORIES_URI}/profile.md"
PREFERENCES_URI = f"{USER_MEMORIES_URI}/preferences"
PREFERENCES_QUERY = "user preferences, habits and stable facts about the user"
PROFILE_HEADER = "[User Profile]"
PREFERENCES_HEADER = "[User Preferences]"
MAX_PREFERENCES = 5
PROFILE_MAX_TOKENS = 1000
"""Profile budget when recallTokenBudget sets none (otherwise half of it, as upstream)."""


PROFILE_TTL_SECONDS = 30.0
"""How long an assembly replica reuses a tenant's profile as it is. StoreMemory, ForgetMemory and
commits made in the same process drop it at once (`shared.domain.memory_changes`); in other
processes a stored or forgotten preference shows in the profile at most this much later (recall
finds it at once meanwhile). Past it, the profile is loaded again, less the preferences' `find`
when they did not change (`PreferencesSeen`)."""
PREFERENCES_SETTLE_SECONDS = 120.0
"""A preference written this recently may not be embedded yet (OpenViking embeds a write from a
queue, seconds behind under load) or changed in the listing's second: a listing holding one
vouches for nothing, and the next load finds again."""
MAX_LISTED_PREFERENCES = 200
"""Entries of the preferences' listing; a longer one vouches for nothing (the `find` decides)."""

PreferencesVersion = frozenset[tuple[str, str, int]]
"""The preferences' listing (uri, modTime, size), recursively: memories, folders and the folders'
hidden `.overview.md` / `.abstract.md` (OpenViking writes them again when a memory changes)."""


@dataclass(frozen=True)
class PreferencesSeen:
    """The preferences' `find` and, when the listing taken with it vouches for it, that listing:
    a later load that lists the same keeps the `find` instead of sending it again (an embedding
    and a vector search; a host asking less often than the TTL paid it on every call)."""

    found: FindResult
    version: PreferencesVersion | None
    """None: the listing failed, was cut, held something unsettled, or lacked a memory the
    `find` returned (a forget whose vectors were not removed yet)."""


ProfileKey = tuple[str, int, int]
"""(agent, token bound, item chars bound), within a tenant."""


@dataclass
class StableProfile:
    blocks: list[str] = field(default_factory=list)
    uris: frozenset[str] = frozenset()
    """Memories shown in the profile (recall leaves them out)."""
    degraded_reasons: list[str] = field(default_factory=list)
    preferences: PreferencesSeen | None = None
    """The preferences' `find` it was built from (None: none was made)."""


ProfileCache = TenantCache[ProfileKey, StableProfile]


def _cut_to_tokens(text: str, counter: TokenCounter, max_tokens: int) -> str:
    count = counter.count(text)
    while count > max_tokens and text:
        text = text[: int(len(text) * max_tokens / count * 0.95)].rstrip()
        count = counter.count(text + "...")
        if count <= max_tokens:
            return text + "..."
    return text


def profile_cache(
    ttl: float = PROFILE_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
) -> ProfileCache:
    """Profiles by (tenant, agent, bounds) for `ttl`; degraded ones are not kept."""
    return TenantCache(ttl, keep=lambda profile: not profile.degraded_reasons, clock=clock)


async def preferences_version(
    client: FolderLister, tenant: Tenant, *, deadline: float, now: float
) -> PreferencesVersion | None:
    """The preferences' listing, if it vouches for what a `find` of them returns: complete, every
    entry settled (`PREFERENCES_SETTLE_SECONDS`); empty when there are none. The folders'
    hidden `.overview.md` are in it: the `find` returns them too. Never raises: it only saves a
    `find`."""
    versions = await folder_versions(
        client, tenant, PREFERENCES_URI, deadline=deadline, recursive=True, node_limit=MAX_LISTED_PREFERENCES
    )
    if versions is None or not all(settled(m, now, PREFERENCES_SETTLE_SECONDS) for m, _ in versions.values()):
        return None
    return frozenset((uri, mod_time, size) for uri, (mod_time, size) in versions.items())


def _vouched(found: FindResult, version: PreferencesVersion | None) -> PreferencesVersion | None:
    """`version`, if it lists every memory `found` returned."""
    if version is None:
        return None
    listed = {uri for uri, _, _ in version}
    return version if all(m.uri in listed for m in found.memories) else None


async def _find_preferences(client: MemorySearch, tenant: Tenant, deadline: float) -> FindResult:
    return await bounded(
        client.find(
            tenant,
            PREFERENCES_QUERY,
            target_uri=PREFERENCES_URI,
            limit=MAX_PREFERENCES * 2,
            score_threshold=0.0,
            deadline=deadline,
        ),
        deadline,
    )


async def seen_preferences(
    client: AssemblyBackend, tenant: Tenant, known: PreferencesSeen | None, *, deadline: float, now: float
) -> PreferencesSeen:
    """The preferences' `find` with the listing that vouches for it: `known` again while its
    listing is unchanged, else a new `find` (sent with the listing when nothing can be kept).
    Raises the `find`'s failure."""
    if known is not None and known.version is not None:
        version = await preferences_version(client, tenant, deadline=deadline, now=now)
        if version == known.version:
            return known
        found = await _find_preferences(client, tenant, deadline)
    else:
        found, version = await asyncio.gather(
            _find_preferences(client, tenant, deadline),
            preferences_version(client, tenant, deadline=deadline, now=now),
        )
    return PreferencesSeen(found, _vouched(found, version))


async def load_stable_profile(
    client: AssemblyBackend,
    tenant: Tenant,
    agent_id: str,
    counter: TokenCounter,
    *,
    max_tokens: int,
    max_item_chars: int,
    deadline: float,
    earlier: StableProfile | None = None,
    now: Callable[[], float] = time.time,
) -> StableProfile:
    """Profile blocks within `max_tokens`; a missing profile.md is simply absent. profile.md is
    read every time; the preferences' `find` of an `earlier` profile is kept while their listing
    is the one that vouched for it (`seen_preferences`)."""
    profile = StableProfile()
    if max_tokens <= 0:
        return profile
    read, preferences = await asyncio.gather(
        bounded(client.read(tenant, PROFILE_URI, deadline=deadline), deadline),
        seen_preferences(
            client, tenant, earlier.preferences if earlier else None, deadline=deadline, now=now()
        ),
        return_exceptions=True,
    )
    remaining = max_tokens
    shown: list[str] = []
    if isinstance(read, BaseException):
        if not isinstance(read, Exception):
            raise read
        if not isinstance(read, BackendNotFound):
            profile.degraded_reasons.append(describe_failure("profile.read", read))
    elif read.strip():
        block = _cut_to_tokens(f"{PROFILE_HEADER}\n{read.strip()}", counter, remaining)
        remaining -= counter.count(block)
        profile.blocks.append(block)
        # Recall returns the canonical URI; the profile shown here must not be recalled again.
        shown.append(f"viking://user/{tenant.user_id}/memories/profile.md")
        profile.uris = frozenset(shown)
    if isinstance(preferences, BaseException):
        if not isinstance(preferences, Exception):
            raise preferences
        if not isinstance(preferences, BackendNotFound):
            profile.degraded_reasons.append(describe_failure("profile.preferences", preferences))
        return profile
    profile.preferences = preferences
    candidates = [c for c in merge_candidates([preferences.found.memories], agent_id) if c.abstract.strip()]
    # The agent's own preferences before the user's general ones.
    candidates.sort(key=lambda c: (c.tags and agent_tag(agent_id) in c.tags, c.score), reverse=True)
    lines: list[str] = []
    remaining -= counter.count(PREFERENCES_HEADER) + 1
    for candidate in candidates[:MAX_PREFERENCES]:
        line = memory_line(candidate.category, truncate_content(candidate.abstract, max_item_chars))
        cost = counter.count(line) + 1
        if cost > remaining:
            break
        lines.append(line)
        shown.append(candidate.uri)
        remaining -= cost
    if lines:
        profile.blocks.append("\n".join([PREFERENCES_HEADER, *lines]))
        profile.uris = frozenset(shown)
    return profile
