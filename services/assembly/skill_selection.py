"""Which registered skills a prompt calls for, within the skill section's tokens.

The skill space's (`viking://agent/skills`) best matches, as recall's `find` brings them along
(`services.assembly.skill_pool`: one query embedding per Assemble) or, when that pool may lack
one, from a `find` of their own; their SKILL.md texts from the replica's `SkillCatalogue` (read
once per `SKILL_TTL_SECONDS`, then shown while read again in the background: a read after the
`find` doubles a task's Assemble, `SKILL_STALE_SECONDS`), then:

- a candidate is kept when its similarity clears `MIN_SKILL_SCORE` and lies within
  `SCORE_MARGIN` of the best one (a prompt rarely needs more than one or two skills; a weak,
  flat list of hits means none fits, as for chit-chat the intent stage did not already catch);
- a prompt naming the skill ("use pdf-merge", "the pdf merge skill") lifts it by `NAME_BONUS`;
- each kept skill is one line, name, description and the host's URI; the best one's body follows
  when it fits in what is left of the section;
- a skill whose recent uses failed for a similar input (content-word overlap) says so.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from contextengine.v1 import packet_pb2

from services.assembly.lexical import content_terms, tokens
from services.assembly.ports import MemorySearch
from services.assembly.refreshes import Refreshes
from shared.domain.skills import SKILL_ROOT, Skill, SkillUse, parse_skill_md
from shared.errors import BackendNotFound
from shared.openviking.models.search import SearchHit
from shared.openviking.tenant import Tenant
from shared.sized_cache import SizedCache
from shared.tokens import TokenCounter

SKILL_CANDIDATES = 8
MIN_SKILL_SCORE = 0.58
"""Below this no skill fits (measured: generated tasks' best hit >= 0.59, small talk's 0.50-0.65,
which is why the intent stage, not this floor, keeps skills out of chit-chat)."""
SCORE_MARGIN = 0.08
NAME_BONUS = 0.15
MAX_SKILLS_SHOWN = 5
"""Skills of one object score alike ("lint my backup": backup-clean 0.70, backup-validate 0.67);
one line each is cheap, so the five nearest go in and the model picks."""
SIMILAR_INPUT_OVERLAP = 0.5
"""Share of the prompt's content words a past input must hold to count as "this kind of input"."""
SKILL_TTL_SECONDS = 60.0
"""How long a replica takes a SKILL.md it read as current; a registration in the same process
drops the account's at once."""
SKILL_STALE_SECONDS = 3600.0
"""How long past `SKILL_TTL_SECONDS` a replica still shows the SKILL.md it has while it reads the
file again in the background (stale-while-revalidate); older, the read comes first. The read
can only start once the `find` named the skill, so a read first doubles the Assemble: measured
on the Phase-3 bench's account (200 skills), a task's Assemble took 21.7 ms with every SKILL.md
read after the `find` (a host asking less than once a minute) against 9.5 ms with them known
(one `find` 6.5-7.5 ms). A skill registered anew through another replica shows its new text one
Assemble later than it would with a read first."""
REFRESH_SECONDS = 10.0
"""Longest a background read of a SKILL.md may take."""
CATALOGUE_ACCOUNTS = 1000
SKILLS_HEADER = "[Skills] Registered skills that fit this request (read a skill's URI for its full text):"


@dataclass(frozen=True)
class SkillCandidate:
    skill: Skill
    score: float


@dataclass(frozen=True)
class SelectedSkills:
    text: str
    tokens: int
    skills: list[packet_pb2.InjectedSkill]


def _names_skill(prompt_tokens: set[str], prompt_text: str, skill: Skill) -> bool:
    if skill.name in prompt_text:
        return True
    parts = [p for p in skill.name.replace("_", "-").split("-") if p]
    return bool(parts) and all(p in prompt_tokens for p in parts)


def ranked_candidates(prompt: str, hits: Sequence[tuple[Skill, float]]) -> list[SkillCandidate]:
    """The hits worth showing for `prompt`, best first (pure: the find's hits in, a ranking out)."""
    text = prompt.lower()
    prompt_tokens = set(tokens(text))
    scored = sorted(
        (
            SkillCandidate(skill, score + (NAME_BONUS if _names_skill(prompt_tokens, text, skill) else 0.0))
            for skill, score in hits
        ),
        key=lambda c: -c.score,
    )
    if not scored or scored[0].score < MIN_SKILL_SCORE:
        return []
    best = scored[0].score
    return [c for c in scored if c.score >= best - SCORE_MARGIN][:MAX_SKILLS_SHOWN]


def failure_note(prompt: str, uses: Sequence[SkillUse]) -> str:
    """ "failed ..." when recent uses for an input like `prompt` failed; "" otherwise."""
    words = set(content_terms(prompt))
    similar = [
        u
        for u in uses
        if words and len(words & set(content_terms(u.input))) / len(words) >= SIMILAR_INPUT_OVERLAP
    ]
    failed = [u for u in similar if u.success is False]
    if not failed:
        return ""
    newest = failed[-1]
    return (
        f"failed {len(failed)} of the last {len(similar)} uses for a similar input"
        f' ("{newest.input}", {newest.at})'
    )


def _line(candidate: SkillCandidate, note: str) -> str:
    where = f" ({candidate.skill.host_uri})" if candidate.skill.host_uri else f" ({candidate.skill.uri})"
    warning = f" WARNING: {note}." if note else ""
    return f"- {candidate.skill.name}: {candidate.skill.description}{where}{warning}"


def render_skills(
    prompt: str,
    candidates: Sequence[SkillCandidate],
    uses: Mapping[str, Sequence[SkillUse]],
    counter: TokenCounter,
    max_tokens: int,
) -> SelectedSkills:
    """The skill section for `candidates` within `max_tokens`: lines while they fit, then the best
    skill's body when it fits in the rest."""
    lines = [SKILLS_HEADER]
    shown: list[packet_pb2.InjectedSkill] = []
    for candidate in candidates:
        note = failure_note(prompt, uses.get(candidate.skill.name, ()))
        line = _line(candidate, note)
        if counter.count("\n".join([*lines, line])) > max_tokens:
            break
        lines.append(line)
        shown.append(
            packet_pb2.InjectedSkill(
                name=candidate.skill.name,
                description=candidate.skill.description,
                uri=candidate.skill.host_uri or candidate.skill.uri,
                failure_note=note,
                score=candidate.score,
            )
        )
    if not shown:
        return SelectedSkills("", 0, [])
    text = "\n".join(lines)
    body = candidates[0].skill.body.strip()
    if body:
        with_body = f"{text}\n[Skill {candidates[0].skill.name}]\n{body}"
        if counter.count(with_body) <= max_tokens:
            text = with_body
            shown[0].body_included = True
    return SelectedSkills(text, counter.count(text), shown)


class SkillCatalogue:
    """Parsed SKILL.md texts by URI, per account (the skill space is account-wide): read when
    first asked for or older than `SKILL_TTL_SECONDS` + `SKILL_STALE_SECONDS`, read again once
    the call is answered when older than `SKILL_TTL_SECONDS` (one read per file at a time)."""

    def __init__(
        self,
        ttl: float = SKILL_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        *,
        stale: float = SKILL_STALE_SECONDS,
    ) -> None:
        self._ttl = ttl
        self._stale = stale
        self._clock = clock
        self._accounts: SizedCache[str, dict[str, tuple[float, Skill | None]]] = SizedCache(
            CATALOGUE_ACCOUNTS
        )
        self._refreshes: Refreshes[tuple[str, str]] = Refreshes("SKILL.md")

    def invalidate(self, tenant: Tenant) -> None:
        self._accounts.pop(tenant.account_id)

    async def skills(
        self, client: MemorySearch, tenant: Tenant, uris: Sequence[str], *, deadline: float
    ) -> dict[str, Skill]:
        now = self._clock()
        known = self._accounts.get(tenant.account_id)
        if known is None:
            known = {}
            self._accounts.put(tenant.account_id, known)
        ages = {u: now - known[u][0] for u in uris if u in known}
        missing = [u for u in uris if ages.get(u, math.inf) >= self._ttl + self._stale]
        for uri in uris:
            if self._ttl <= ages.get(uri, math.inf) < self._ttl + self._stale:
                self._refresh(client, tenant, uri, known)
        texts = await asyncio.gather(*(_read_or_empty(client, tenant, u, deadline) for u in missing))
        for uri, text in zip(missing, texts, strict=True):
            known[uri] = (now, parse_skill_md(text))
        return {u: skill for u in uris if (skill := known[u][1]) is not None}

    def _refresh(
        self, client: MemorySearch, tenant: Tenant, uri: str, known: dict[str, tuple[float, Skill | None]]
    ) -> None:
        async def read() -> None:
            text = await _read_or_empty(client, tenant, uri, time.monotonic() + REFRESH_SECONDS)
            known[uri] = (self._clock(), parse_skill_md(text))

        self._refreshes.start((tenant.account_id, uri), read)

    async def aclose(self) -> None:
        """Stop the background reads still running (at shutdown, before the client closes)."""
        await self._refreshes.aclose()


async def _read_or_empty(client: MemorySearch, tenant: Tenant, uri: str, deadline: float) -> str:
    try:
        return await client.read(tenant, uri, deadline=deadline)
    except BackendNotFound:
        return ""


async def skill_hits(
    client: MemorySearch,
    tenant: Tenant,
    query: str,
    catalogue: SkillCatalogue,
    *,
    pooled: Awaitable[list[SearchHit] | None] | None = None,
    deadline: float,
) -> list[tuple[Skill, float]]:
    """The skill space's best matches for `query`, with their SKILL.md parsed: those recall's
    `find` brought along (`pooled`, `services.assembly.skill_pool`) when they are complete, else
    from a `find` of their own."""
    hits = await pooled if pooled is not None else None
    if hits is None:
        found = await client.find(
            tenant,
            query,
            target_uri=SKILL_ROOT,
            limit=SKILL_CANDIDATES,
            level=2,
            context_type="skill",
            deadline=deadline,
        )
        hits = found.skills
    skills = await catalogue.skills(client, tenant, [hit.uri for hit in hits], deadline=deadline)
    return [(skills[hit.uri], hit.score) for hit in hits if hit.uri in skills]
