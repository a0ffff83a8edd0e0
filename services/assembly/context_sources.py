"""Assemble's Phase-3 sources as one stage: skills, tool experience and the directory listing.

`ContextSources.start` sends off what the recall intent asks for (each part bounded by the same
deadline as retrieval); `collect` renders one text section within `section_cap` tokens: tool
experience first (smallest and most specific), then skills, then the directory, each part also
held to its own share of the section. A failed part is left out and reported, never fatal.
The section is spent from the request's budget before packing, so the total stays within it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contextengine.v1 import common_pb2, packet_pb2

from services.assembly.directory_listing import (
    DirectoryCache,
    directory_cache,
    list_directory,
    render_directory,
)
from services.assembly.ports import AssemblyBackend
from services.assembly.recall import bounded, describe_failure
from services.assembly.recall_intent import RecallIntent, RecallSource
from services.assembly.skill_pool import SkillPool
from services.assembly.skill_selection import SkillCatalogue, ranked_candidates, render_skills, skill_hits
from services.assembly.tool_memory import render_tools, tools_named
from services.assembly.user_documents import EngineFolder, UserDocuments, user_documents_cache
from shared.domain.skills import SKILL_USES_URI, Skill, SkillUse, uses_from_document
from shared.domain.tool_experience import TOOL_EXPERIENCE_URI, ToolRecord, records_from_document
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

T = TypeVar("T")

SECTION_SHARE = 0.25
"""Most of the request's budget the section may take."""
DEFAULT_SECTION_CAP = 1000
"""Section tokens when recallTokenBudget sets none."""
SKILLS_SHARE = 0.6
TOOLS_SHARE = 0.3
DIRECTORY_SHARE = 0.3
DIRECTORY_MIN_BUDGET = 8000
"""Smallest request budget that gets the listing at a stream's start unasked: below it every
token goes to recall (the recall bench's new-session questions at 1k-4k)."""


@dataclass(frozen=True)
class SourceCaches:
    directory: DirectoryCache = field(default_factory=directory_cache)
    documents: UserDocuments = field(default_factory=user_documents_cache)
    skills: SkillCatalogue = field(default_factory=SkillCatalogue)

    def invalidate(self, tenant: Tenant) -> None:
        self.directory.invalidate(tenant)
        self.documents.invalidate(tenant)
        self.skills.invalidate(tenant)

    async def aclose(self) -> None:
        """Stop the background reads of the directory and the skill texts."""
        await self.directory.aclose()
        await self.skills.aclose()


@dataclass
class SourcesSection:
    text: str = ""
    skills_tokens: int = 0
    tools_tokens: int = 0
    directory_tokens: int = 0
    skills: list[packet_pb2.InjectedSkill] = field(default_factory=list)
    tool_experience: list[packet_pb2.ToolExperience] = field(default_factory=list)
    directory: list[packet_pb2.DirectoryEntry] = field(default_factory=list)
    degraded_reasons: list[str] = field(default_factory=list)
    tokens: int = 0
    """Of the whole text (the parts' counts plus their joins)."""

    def add_to(
        self, packet: packet_pb2.AssembledContextPacket, budget: int, system_prompt_addition: str
    ) -> str:
        """Put the section in `packet` (its parts and their tokens, spent from `budget`) and return
        the system prompt addition that carries it after `system_prompt_addition`."""
        packet.skills.extend(self.skills)
        packet.tool_experience.extend(self.tool_experience)
        packet.directory.extend(self.directory)
        tokens = packet.tokens
        tokens.budget = budget
        tokens.skills, tokens.tools, tokens.directory = (
            self.skills_tokens,
            self.tools_tokens,
            self.directory_tokens,
        )
        tokens.used += self.tokens
        packet.estimated_tokens += self.tokens
        return "\n\n".join(text for text in (system_prompt_addition, self.text) if text)


def wants_skills(intent: RecallIntent) -> bool:
    return intent.recall and intent.wants(RecallSource.SKILLS)


def section_cap(budget: int, recall_token_budget: int) -> int:
    return min(recall_token_budget or DEFAULT_SECTION_CAP, int(budget * SECTION_SHARE))


def _started(call: Awaitable[T], deadline: float) -> asyncio.Future[T]:
    return asyncio.ensure_future(bounded(call, deadline))


@dataclass(frozen=True)
class ContextSources:
    intent: RecallIntent
    prompt: str
    newest_first: Sequence[common_pb2.ConversationMessage]
    skills: asyncio.Future[list[tuple[Skill, float]]] | None
    skill_uses: asyncio.Future[dict[str, Any]] | None
    tools: asyncio.Future[dict[str, Any]] | None
    directory: asyncio.Future[list[packet_pb2.DirectoryEntry]] | None

    @classmethod
    def start(
        cls,
        client: AssemblyBackend,
        tenant: Tenant,
        intent: RecallIntent,
        prompt: str,
        newest_first: Sequence[common_pb2.ConversationMessage],
        *,
        caches: SourceCaches,
        skill_pool: SkillPool | None = None,
        deadline: float,
    ) -> ContextSources:
        """`skill_pool`: the skill hits recall's `find` brings along, when it does."""
        want_skills = wants_skills(intent)
        folder = EngineFolder(client, tenant, deadline)

        def document(uri: str) -> asyncio.Future[dict[str, Any]]:
            return _started(folder.document(caches.documents, uri), deadline)

        return cls(
            intent,
            prompt,
            newest_first,
            skills=_started(
                skill_hits(client, tenant, intent.query, caches.skills, pooled=skill_pool, deadline=deadline),
                deadline,
            )
            if want_skills
            else None,
            skill_uses=document(SKILL_USES_URI) if want_skills else None,
            tools=document(TOOL_EXPERIENCE_URI) if intent.wants(RecallSource.TOOLS) else None,
            directory=_started(
                # Listed within a bound of its own (a listing past its TTL is listed again after
                # the answer, `directory_listing`); `_started` bounds this call's wait.
                caches.directory.get(tenant, "", lambda: list_directory(client, tenant)),
                deadline,
            )
            if intent.recall and intent.wants(RecallSource.DIRECTORY)
            else None,
        )

    def abandon(self) -> None:
        for part in (self.skills, self.skill_uses, self.tools, self.directory):
            if part is not None:
                part.add_done_callback(_ignore)

    async def collect(self, counter: TokenCounter, budget: int, recall_token_budget: int) -> SourcesSection:
        """The section for a request of `budget` tokens (at most `section_cap` of them)."""
        cap = section_cap(budget, recall_token_budget)
        section = SourcesSection()
        texts: list[str] = []
        left = cap
        if self.tools is not None:
            data = await self._part("tool experience", self.tools, section, {})
            records: dict[str, ToolRecord] = records_from_document(data)
            names = tools_named(self.prompt, self.newest_first, list(records))
            tools = render_tools(names, records, counter, min(left, int(cap * TOOLS_SHARE)))
            section.tools_tokens, section.tool_experience = tools.tokens, tools.experience
            left -= tools.tokens
            texts.append(tools.text)
        if self.skills is not None and self.skill_uses is not None:
            hits = await self._part("skills", self.skills, section, [])
            uses: dict[str, list[SkillUse]] = uses_from_document(
                await self._part("skill uses", self.skill_uses, section, {})
            )
            candidates = ranked_candidates(self.prompt or self.intent.query, hits)
            skills = render_skills(
                self.prompt or self.intent.query,
                candidates,
                uses,
                counter,
                min(left, int(cap * SKILLS_SHARE)),
            )
            section.skills_tokens, section.skills = skills.tokens, skills.skills
            left -= skills.tokens
            texts.append(skills.text)
        if self.directory is not None and (self.intent.directory_asked or budget >= DIRECTORY_MIN_BUDGET):
            entries = await self._part("directory", self.directory, section, [])
            listing = render_directory(entries, counter, min(left, int(cap * DIRECTORY_SHARE)))
            section.directory_tokens, section.directory = listing.tokens, listing.entries
            texts.append(listing.text)
        section.text = "\n\n".join(t for t in texts if t)
        section.tokens = counter.count(section.text) if section.text else 0
        return section

    @staticmethod
    async def _part(name: str, part: asyncio.Future[T], section: SourcesSection, empty: T) -> T:
        try:
            return await part
        except Exception as exc:
            section.degraded_reasons.append(describe_failure(name, exc))
            return empty


def _ignore(part: asyncio.Future[Any]) -> None:
    if not part.cancelled():
        part.exception()
