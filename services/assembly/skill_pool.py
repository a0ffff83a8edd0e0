"""Skills ride on recall's `find`: one query embedding per Assemble, not two.

Measured (Phase-3 bench's account, 200 skills, 2 vCPU; docs/benchmarks.md): with the PyTorch
embedder a `find` was mostly the query's embedding (OpenViking's telemetry: 20-26 ms of 22-29
ms), and recall's `find` beside a second one over the skill space took 46 ms against 30 ms for
one; with the ONNX embedder 22 ms against 11 ms. A local skill index queried with its own
embedding of the prompt cost what the second `find` did with PyTorch (45 ms beside recall's)
and pays that embedding for every user; one without an embedding (BM25 over the skills' names,
descriptions and bodies) put the task's skill among its top five for 60 % of the bench's
paraphrased tasks, against 94 % for the embedding.

When the intent wants skills and recall runs, recall's `find` takes the skill space as a second
root and `SKILL_CANDIDATES` more hits (`pool_find`); its skill hits are handed to the skill
stage (`skill_pool`). A `find`'s `limit` is shared by its roots (one ranking), so the pool holds
the account's best skills only down to the score of its last hit. It is *complete*, the same
best skills a `find` over the skill space alone returns, when the `find` returned fewer hits
than its limit, when it holds `SKILL_CANDIDATES` skills, or when its last hit scores below the
least a shown skill can score (`SKILL_FLOOR`); otherwise (`None`) the skill stage makes its own
`find`, after this one. Recall keeps its `TURN_CANDIDATES` best memory hits, as before; only
when more than `SKILL_CANDIDATES` skills outrank its 200th memory does its pool come up short
by the difference, at its low-scoring end. For a user whose memories are fewer, the `find` asks
only for as many as the user holds (`pool_depth`), not for a page of the account's skills.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from services.assembly.skill_selection import MIN_SKILL_SCORE, NAME_BONUS, SKILL_CANDIDATES
from shared.domain.skills import SKILL_ROOT
from shared.openviking.models.search import FindResult, SearchHit

SKILL_FLOOR = MIN_SKILL_SCORE - NAME_BONUS
"""The lowest similarity a skill can have and still be shown (a prompt naming it lifts it)."""

SkillPool = asyncio.Future[list[SearchHit] | None]
"""The skill hits recall's `find` brought along (None: not complete, the skill stage finds)."""


def pool_find(memory_root: str, memory_limit: int, pool: SkillPool | None) -> tuple[str | list[str], int]:
    """`target_uri` and `limit` of recall's `find`: the skill space too when a stage waits for it."""
    if pool is None:
        return memory_root, memory_limit
    return [memory_root, SKILL_ROOT], memory_limit + SKILL_CANDIDATES


def pool_skills(found: FindResult, limit: int) -> list[SearchHit] | None:
    """The best skill hits of a `find` of `limit` over memories and skills (best first, at most
    `SKILL_CANDIDATES`), or None when a skill that could be shown may have been left out."""
    skills = [hit for hit in found.skills if hit.level == 2][:SKILL_CANDIDATES]
    hits: Sequence[SearchHit] = [*found.memories, *found.resources, *found.skills]
    complete = (
        found.hit_count < limit
        or len(skills) >= SKILL_CANDIDATES
        or min(hit.score for hit in hits) < SKILL_FLOOR
    )
    return skills if complete else None


def hand_over(pool: SkillPool | None, skills: list[SearchHit] | None) -> None:
    """Resolve `pool` with recall's skill hits (None: the skill stage makes its own `find`); a
    pool already resolved, or given up by its stage, is left alone."""
    if pool is not None and not pool.done():
        pool.set_result(skills)
