"""The stable profile: `profile.md` plus the user's preference memories, bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from services.assembly.candidates import agent_tag, merge_candidates
from services.assembly.memory_rules import memory_line, truncate_content
from services.assembly.ports import MemorySearch
from services.assembly.recall import USER_MEMORIES_URI, bounded, describe_failure
from services.assembly.tenant_cache import TenantCache
from shared.errors import BackendNotFound
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
"""How long an assembly replica reuses a tenant's profile. StoreMemory, ForgetMemory and commits
made in the same process drop it at once (`shared.domain.memory_changes`); in other processes a
stored or forgotten preference shows in the profile at most this much later (recall finds it at
once meanwhile). Saves a `find` (an embedding) per Assemble."""

ProfileKey = tuple[str, int, int]
"""(agent, token bound, item chars bound), within a tenant."""


@dataclass
class StableProfile:
    blocks: list[str] = field(default_factory=list)
    uris: frozenset[str] = frozenset()
    """Memories shown in the profile (recall leaves them out)."""
    degraded_reasons: list[str] = field(default_factory=list)


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
