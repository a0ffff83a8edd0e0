"""Which registered skills a prompt calls for, within the skill section's tokens.

The skill space's (`viking://agent/skills`) best matches, as recall's `find` brings them along
(`services.assembly.skill_pool`: one query embedding per Assemble) or, when that pool may lack
one, from a `find` of their own; their SKILL.md texts from the replica's `SkillCatalogue` (read
once per `SKILL_TTL_SECONDS`: `read_content` on the find cost ~60 ms more per Assemble in the
Phase-3 bench), then:

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
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from contextengine.v1 import packet_pb2

from services.assembly.lexical import content_terms, tokens
from services.assembly.ports import MemorySearch
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
"""How long a replica reuses a SKILL.md it read; a registration in the same process drops the
account's at once."""
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
    """Parsed SKILL.md texts by URI, per account (the skill space is account-wide)."""

    def __init__(self, ttl: float = SKILL_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._accounts: SizedCache[str, dict[str, tuple[float, Skill | None]]] = SizedCache(
            CATALOGUE_ACCOUNTS
        )

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
        missing = [u for u in uris if u not in known or now - known[u][0] >= self._ttl]
        texts = await asyncio.gather(*(_read_or_empty(client, tenant, u, deadline) for u in missing))
        for uri, text in zip(missing, texts, strict=True):
            known[uri] = (now, parse_skill_md(text))
        return {u: skill for u in uris if (skill := known[u][1]) is not None}


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
