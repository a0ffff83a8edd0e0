"""The stable profile: `profile.md` plus the user's preference memories, bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from services.assembly.candidates import agent_tag, merge_candidates
from services.assembly.memory_rules import memory_line, truncate_content
from services.assembly.ports import MemorySearch
from services.assembly.recall import USER_MEMORIES_URI, bounded, describe_failure
from shared.errors import BackendNotFound
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache
from shared.tokens import TokenCounter

PROFILE_URI = f"{USER_MEMORIES_URI}/profile.md"
PREFERENCES_URI = f"{USER_MEMORIES_URI}/preferences"
PREFERENCES_QUERY = "user preferences, habits and stable facts about the user"
PROFILE_HEADER = "[User Profile]"
PREFERENCES_HEADER = "[User Preferences]"
MAX_PREFERENCES = 5
PROFILE_MAX_TOKENS = 1000
"""Profile budget when recallTokenBudget sets none (otherwise half of it, as upstream)."""


MAX_CACHED_TENANTS = 10_000
PROFILE_TTL_SECONDS = 30.0
"""How long an assembly replica reuses a tenant's profile. StoreMemory, ForgetMemory and commits
made in the same process drop it at once (`shared.domain.memory_changes`); in other processes a
stored or forgotten preference shows in the profile at most this much later (recall finds it at
once meanwhile). Saves a `find` (an embedding) per Assemble."""

ProfileKey = tuple[Tenant, str, int, int]
"""(tenant, agent, token bound, item chars bound)."""


@dataclass
class StableProfile:
    blocks: list[str] = field(default_factory=list)
    uris: frozenset[str] = frozenset()
    """Memories shown in the profile (recall leaves them out)."""
    degraded_reasons: list[str] = field(default_factory=list)


def _cut_to_tokens(text: str, counter: TokenCounter, max_tokens: int) -> str:
    count = counter.count(text)
    while count > max_tokens and text:
        text = text[: int(len(text) * max_tokens / count * 0.95)].rstrip()
        count = counter.count(text + "...")
        if count <= max_tokens:
            return text + "..."
    return text


class ProfileCache:
    """Profiles by (tenant, agent, bounds) for `PROFILE_TTL_SECONDS`; degraded ones are not kept.

    `invalidate(tenant)` drops the tenant's profiles; a load that was in flight meanwhile is
    returned to its caller but not kept (it may predate the change)."""

    def __init__(self, ttl: float = PROFILE_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._tenants: SizedCache[Tenant, dict[ProfileKey, tuple[float, StableProfile]]] = SizedCache(
            MAX_CACHED_TENANTS
        )
        self._generations: SizedCache[Tenant, int] = SizedCache(MAX_CACHED_TENANTS)
        """Invalidations per tenant, to tell a load that raced one."""

    def invalidate(self, tenant: Tenant) -> None:
        self._tenants.pop(tenant)
        self._generations.put(tenant, (self._generations.get(tenant) or 0) + 1)

    async def get(self, load: Callable[[], Awaitable[StableProfile]], key: ProfileKey) -> StableProfile:
        tenant = key[0]
        now = self._clock()
        entries = self._tenants.get(tenant)
        hit = entries.get(key) if entries is not None else None
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        generation = self._generations.get(tenant)
        profile = await load()
        if not profile.degraded_reasons and self._generations.get(tenant) == generation:
            entries = self._tenants.get(tenant)
            if entries is None:
                entries = {}
                self._tenants.put(tenant, entries)
            entries[key] = (now, profile)
        return profile


async def load_stable_profile(
    client: MemorySearch,
    tenant: Tenant,
    agent_id: str,
    counter: TokenCounter,
    *,
    max_tokens: int,
    max_item_chars: int,
    deadline: float,
) -> StableProfile:
    """Profile blocks within `max_tokens`; a missing profile.md is simply absent."""
    profile = StableProfile()
    if max_tokens <= 0:
        return profile
    read, found = await asyncio.gather(
        bounded(client.read(tenant, PROFILE_URI, deadline=deadline), deadline),
        bounded(
            client.find(
                tenant,
                PREFERENCES_QUERY,
                target_uri=PREFERENCES_URI,
                limit=MAX_PREFERENCES * 2,
                score_threshold=0.0,
                deadline=deadline,
            ),
            deadline,
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
    if isinstance(found, BaseException):
        if not isinstance(found, Exception):
            raise found
        if not isinstance(found, BackendNotFound):
            profile.degraded_reasons.append(describe_failure("profile.preferences", found))
        return profile
    candidates = [c for c in merge_candidates([found.memories], agent_id) if c.abstract.strip()]
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
