"""How deep recall's `find` reaches into a user's memory root when it shares a page with skills.

Recall's `find` takes the skill space as a second root when the skill stage waits for it
(`skill_pool`), and a `find`'s `limit` is shared by its roots. At the full depth (200 memory hits
plus the skills' 8) a user whose memory root holds a few documents gets a page of up to 200
skills the skill stage never reads, and OpenViking pays for every hit it returns. Measured on
the Phase-3 bench's account (200 skills, a user without memories, 2 vCPU): that `find` took 18.2
ms at limit 208 against 12.1 ms at limit 24 and 11.4 ms for a plain `find` of 10.

So each replica remembers, per user, how many documents of the memory root the user's last
*complete* page held (fewer hits than its limit: OpenViking returned every document, whatever
the limit), for `DEPTH_TTL_SECONDS` (a change announced in the process drops it at once), and
asks for that many plus `HEADROOM` (documents written since by capture). Without the skill root
the depth changes nothing (a page never holds more than the user has), so it is not applied.

What it can cost: while a learned depth is used, a memory document that ranks below the page's
last hit (skills outrank it) is left out of the semantic pool, where at the full depth it would
have been its low-scoring end. When the memory side fills its whole share, the user has grown
past the headroom: recall asks again at the full depth (`memory_find`, recall's `find`), in the
same call. Since every page checks the count so, what an older count adds to that is bounded:
of the documents written since it was learned (at most `HEADROOM`, or the page asks again) those
the page's skills outrank, which a fresh count's longer page could have held at its low end. The
TTL says how often a page at the full depth learns the count again (a page full of skills teaches
nothing). At 30 s, a host asking less often than that paid the full depth on every call (the
Phase-3 bench's paced rounds: 18 ms against 12 for that `find`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from services.assembly.ports import MemorySearch
from services.assembly.skill_pool import SkillPool, pool_find
from shared.openviking.models.search import FindResult
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache

DEPTH_TTL_SECONDS = 3600.0
"""How long a learned count stands before a page at the full depth learns it again."""
HEADROOM = 16
"""Memory documents asked for beyond the learned count."""
MAX_USERS = 10_000


class PoolDepths:
    """Per user, the memory-root documents of the last complete page, while fresh."""

    def __init__(
        self, *, ttl: float = DEPTH_TTL_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._counts: SizedCache[Tenant, tuple[int, float]] = SizedCache(MAX_USERS)

    def depth(self, tenant: Tenant, full: int) -> int:
        """Memory hits to ask for: the learned count plus `HEADROOM`, at most `full` (`full`
        when none is known or it is stale)."""
        known = self._counts.get(tenant)
        if known is None or self._clock() - known[1] >= self._ttl:
            return full
        return min(full, known[0] + HEADROOM)

    def learn(self, tenant: Tenant, found: FindResult, limit: int) -> None:
        """Remember the memory root's size from a page of `limit` that came back not full."""
        if found.hit_count < limit:
            self._counts.put(tenant, (len(found.memories), self._clock()))

    def forget(self, tenant: Tenant) -> None:
        """A change to the user's memory was announced: ask at the full depth until relearned."""
        self._counts.pop(tenant)


class Page(NamedTuple):
    found: FindResult
    limit: int


async def memory_find(
    client: MemorySearch,
    tenant: Tenant,
    query: str,
    *,
    root: str,
    full_depth: int,
    skill_pool: SkillPool | None,
    depths: PoolDepths | None,
    deadline: float,
) -> Page:
    """Recall's `find` over the user's memory `root` (and the skill space when `skill_pool` waits),
    as deep into the memories as the user's learned size needs, at most `full_depth`; asked again
    at the full depth when the page came back full with the memory side filling its whole share
    (the user has grown past the headroom)."""
    full = full_depth
    depth = depths.depth(tenant, full) if depths is not None and skill_pool is not None else full
    while True:
        target, limit = pool_find(root, depth, skill_pool)
        found = await client.find(
            tenant, query, target_uri=target, limit=limit, score_threshold=0.0, deadline=deadline
        )
        if depths is not None:
            depths.learn(tenant, found, limit)
        if depth >= full or found.hit_count < limit or len(found.memories) < depth:
            return Page(found, limit)
        depth = full
