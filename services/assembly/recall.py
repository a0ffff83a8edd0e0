"""Memory recall: wide retrieval, narrow injection (design §3.1 rules, moved into assemble).

Parallel find over the user's memories and the agent's memories, then locally: dedupe by uri,
level == 2 only, score threshold, category+abstract dedupe, query-aware ranking, abstract
preferred over the body, per-item truncation and a total token budget counted with the real
tokenizer. OpenViking 0.5.2 has no per-agent space: agent memories are files under
`viking://~/memories/` tagged `agent=<agent id, lower-cased>`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from contextengine.v1 import packet_pb2

from services.assembly.injection import MemoryForInjection
from services.assembly.ports import MemorySearch
from shared.config import Settings
from shared.errors import ContextEngineError
from shared.openviking.models.search import SearchHit
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

USER_MEMORIES_URI = "viking://~/memories"
AGENT_TAG_KEY = "agent"
LEAF_BONUS = 0.12
TEMPORAL_BONUS = 0.10
PREFERENCE_BONUS = 0.08
MAX_OVERLAP_BONUS = 0.2
QUERY_TOKEN_LIMIT = 8
EVENT_CATEGORIES = frozenset({"events", "cases"})
"""Categories deduplicated by uri only (distinct events may share an abstract)."""

_QUERY_TOKEN = re.compile(r"[a-z0-9]{2,}")
_STOPWORD_TEXT = (
    "the a an and or but if of to in on at for with about from by as is are was were be been being "
    "do does did have has had i me my we our you your he she it its they them their this that these "
    "those what which who whom how when where why can could would should will shall may might must "
    "not no yes so than then there here just also very too any all some please tell know remember"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_TEMPORAL = re.compile(
    r"\b(when|yesterday|today|tomorrow|ago|last|recent|recently|earlier|before|after|date|time|week|month"
    r"|year|since|until)\b|什么时候|昨天|今天|上周|上次|最近|之前|以前|几号|哪天",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(prefer|prefers|preference|preferences|like|likes|love|loves|favorite|favourite|hate|hates|dislike"
    r"|want|wants|usually|style)\b|喜欢|偏好|最爱|讨厌|习惯|想要",
    re.IGNORECASE,
)

T = TypeVar("T")


@dataclass(frozen=True)
class RecallConfig:
    limit: int
    score_threshold: float
    max_content_chars: int
    prefer_abstract: bool
    token_budget: int

    @classmethod
    def from_settings(cls, settings: Settings, *, limit: int = 0) -> RecallConfig:
        return cls(
            limit=limit or settings.recall_limit,
            score_threshold=settings.recall_score_threshold,
            max_content_chars=settings.recall_max_content_chars,
            prefer_abstract=settings.recall_prefer_abstract,
            token_budget=settings.recall_token_budget,
        )

    @property
    def candidate_limit(self) -> int:
        return max(self.limit * 4, 20)


@dataclass(frozen=True)
class Candidate:
    uri: str
    abstract: str
    score: float
    """Clamped to [0, 1]."""
    level: int
    category: str
    scope: packet_pb2.MemoryScope.ValueType
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecalledItem:
    candidate: Candidate
    rank: float
    content: str
    tokens: int = 0

    def for_injection(self) -> MemoryForInjection:
        return MemoryForInjection(
            self.candidate.uri, self.candidate.category, self.content, self.candidate.score
        )

    def to_proto(self, query: str) -> packet_pb2.RecalledMemory:
        c = self.candidate
        return packet_pb2.RecalledMemory(
            query=query,
            uri=c.uri,
            abstract=c.abstract,
            score=c.score,
            category=c.category,
            content=self.content,
            scope=c.scope,
            tags=list(c.tags),
        )


@dataclass
class RecallOutcome:
    query: str
    items: list[RecalledItem] = field(default_factory=list)
    degraded_reasons: list[str] = field(default_factory=list)


def agent_tag(agent_id: str) -> str:
    """The tag marking a memory as the agent's (OpenViking lower-cases tags)."""
    return f"{AGENT_TAG_KEY}={agent_id.lower()}"


def category_of(uri: str) -> str:
    """`.../memories/preferences/x.md` -> `preferences`; `.../memories/profile.md` -> `profile`."""
    _, marker, rest = uri.partition("/memories/")
    if not marker or not rest:
        return "memory"
    head, slash, _ = rest.partition("/")
    if slash:
        return head or "memory"
    return head.rsplit(".", 1)[0] or "memory"


def _tag_value(tags: Sequence[str], key: str) -> str | None:
    for tag in tags:
        k, eq, v = tag.partition("=")
        if eq and k.strip().lower() == key:
            return v.strip().lower()
    return None


def clamp_score(score: float) -> float:
    return min(1.0, max(0.0, score))


def to_candidate(hit: SearchHit, agent_id: str) -> Candidate | None:
    """The hit as a candidate for this agent; None when it belongs to another agent."""
    owner = _tag_value(hit.tags, AGENT_TAG_KEY)
    if owner is not None and owner != agent_id.lower():
        return None
    scope = packet_pb2.MEMORY_SCOPE_AGENT if owner is not None else packet_pb2.MEMORY_SCOPE_USER
    return Candidate(
        uri=hit.uri,
        abstract=hit.abstract,
        score=clamp_score(hit.score),
        level=hit.level,
        category=category_of(hit.uri),
        scope=scope,
        tags=tuple(hit.tags),
    )


def merge_candidates(hit_lists: Sequence[Sequence[SearchHit]], agent_id: str) -> list[Candidate]:
    """Merge the passes in order, dedupe by uri (first wins), keep level 2 only."""
    seen: set[str] = set()
    merged: list[Candidate] = []
    for hits in hit_lists:
        for hit in hits:
            if hit.uri in seen or hit.level != 2:
                continue
            candidate = to_candidate(hit, agent_id)
            if candidate is None:
                continue
            seen.add(hit.uri)
            merged.append(candidate)
    return merged


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def select_candidates(candidates: Sequence[Candidate], threshold: float, cap: int) -> list[Candidate]:
    """Sort by score, drop below `threshold`, dedupe by category + normalised abstract, cap."""
    ordered = sorted(candidates, key=lambda c: c.score, reverse=True)
    seen: set[tuple[str, str]] = set()
    kept: list[Candidate] = []
    for candidate in ordered:
        if candidate.score < threshold:
            continue
        if candidate.category in EVENT_CATEGORIES:
            key = (candidate.category, "uri:" + candidate.uri)
        else:
            key = (candidate.category, _normalise(candidate.abstract) or "uri:" + candidate.uri)
        if key in seen:
            continue
        seen.add(key)
        kept.append(candidate)
        if len(kept) >= cap:
            break
    return kept


def query_tokens(query: str) -> list[str]:
    """The first 8 distinct `[a-z0-9]{2,}` tokens of the query, stopwords removed."""
    tokens: list[str] = []
    for token in _QUERY_TOKEN.findall(query.lower()):
        if token in _STOPWORDS or token in tokens:
            continue
        tokens.append(token)
        if len(tokens) == QUERY_TOKEN_LIMIT:
            break
    return tokens


def rank_score(candidate: Candidate, query: str, tokens: Sequence[str] | None = None) -> float:
    """score + 0.12 leaf + 0.10 temporal/event + 0.08 preference/preference + keyword overlap."""
    tokens = query_tokens(query) if tokens is None else tokens
    rank = candidate.score
    if candidate.level == 2:
        rank += LEAF_BONUS
    if candidate.category == "events" and _TEMPORAL.search(query):
        rank += TEMPORAL_BONUS
    if candidate.category == "preferences" and _PREFERENCE.search(query):
        rank += PREFERENCE_BONUS
    if tokens:
        haystack = f"{candidate.uri} {candidate.abstract}".lower()
        matched = sum(1 for token in tokens if token in haystack)
        rank += min(MAX_OVERLAP_BONUS, matched / min(len(tokens), 4) * MAX_OVERLAP_BONUS)
    return rank


def rank_candidates(candidates: Sequence[Candidate], query: str) -> list[tuple[Candidate, float]]:
    tokens = query_tokens(query)
    ranked = [(c, rank_score(c, query, tokens)) for c in candidates]
    ranked.sort(key=lambda pair: pair[1], reverse=True)
    return ranked


def truncate_content(text: str, max_chars: int) -> str:
    """`text` stripped and cut to `max_chars` characters, ending in "..." when cut."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    return text[: max(0, max_chars - 3)].rstrip() + "..."


def memory_line(category: str, content: str) -> str:
    return f"- [{category}] {content}"


def fit_token_budget(items: Sequence[RecalledItem], counter: TokenCounter, budget: int) -> list[RecalledItem]:
    """Items in order while their `- [category] content` lines fit `budget`; the first always does."""
    kept: list[RecalledItem] = []
    used = 0
    for item in items:
        tokens = counter.count(memory_line(item.candidate.category, item.content))
        if kept and used + tokens > budget:
            break
        kept.append(replace(item, tokens=tokens))
        used += tokens
    return kept


def describe_failure(what: str, exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"{what}: timed out"
    if isinstance(exc, ContextEngineError):
        return f"{what}: {type(exc).__name__}: {exc.message}"
    return f"{what}: {type(exc).__name__}"


async def bounded(aw: Awaitable[T], deadline: float) -> T:
    """Await `aw`, giving up (TimeoutError) at the absolute monotonic `deadline`."""
    return await asyncio.wait_for(aw, timeout=max(0.0, deadline - time.monotonic()))


async def recall_memories(
    client: MemorySearch,
    *,
    tenant: Tenant,
    agent_id: str,
    query: str,
    config: RecallConfig,
    counter: TokenCounter,
    deadline: float,
    exclude_uris: frozenset[str] = frozenset(),
) -> RecallOutcome:
    """Retrieve, rank and bound memories for `query`; failures degrade to fewer or no memories."""
    outcome = RecallOutcome(query)
    passes = {
        "recall.user_memories": client.find(
            tenant, query, target_uri=USER_MEMORIES_URI, limit=config.candidate_limit, score_threshold=0.0,
            deadline=deadline,
        ),
        "recall.agent_memories": client.find(
            tenant, query, target_uri=USER_MEMORIES_URI, limit=config.candidate_limit, score_threshold=0.0,
            tags=[agent_tag(agent_id)], deadline=deadline,
        ),
    }  # fmt: skip
    results = await asyncio.gather(*(bounded(p, deadline) for p in passes.values()), return_exceptions=True)
    hit_lists: list[list[SearchHit]] = []
    for what, result in zip(passes, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result
            outcome.degraded_reasons.append(describe_failure(what, result))
        else:
            hit_lists.append(result.memories)
    # Agent memories first: on a uri tie the agent-scoped view wins.
    hit_lists.reverse()
    candidates = [c for c in merge_candidates(hit_lists, agent_id) if c.uri not in exclude_uris]
    selected = select_candidates(candidates, config.score_threshold, config.candidate_limit)
    ranked = rank_candidates(selected, query)[: config.limit]
    contents = await _contents(
        client,
        tenant=tenant,
        candidates=[c for c, _ in ranked],
        config=config,
        deadline=deadline,
        outcome=outcome,
    )
    items = [
        RecalledItem(candidate, rank, truncate_content(content, config.max_content_chars))
        for (candidate, rank), content in zip(ranked, contents, strict=True)
    ]
    outcome.items = fit_token_budget([i for i in items if i.content], counter, config.token_budget)
    return outcome


async def _contents(
    client: MemorySearch,
    *,
    tenant: Tenant,
    candidates: Sequence[Candidate],
    config: RecallConfig,
    deadline: float,
    outcome: RecallOutcome,
) -> list[str]:
    """The abstract when preferred (and present), else the L2 body; a failed read keeps the abstract."""
    needs_body = [not (config.prefer_abstract and c.abstract.strip()) for c in candidates]
    reads = [
        bounded(client.read(tenant, c.uri, deadline=deadline), deadline)
        for c, n in zip(candidates, needs_body, strict=True)
        if n
    ]
    bodies = iter(await asyncio.gather(*reads, return_exceptions=True))
    contents: list[str] = []
    failed = 0
    for candidate, needed in zip(candidates, needs_body, strict=True):
        if not needed:
            contents.append(candidate.abstract)
            continue
        body = next(bodies)
        if isinstance(body, BaseException):
            if not isinstance(body, Exception):
                raise body
            failed += 1
            contents.append(candidate.abstract)
        else:
            contents.append(body)
    if failed:
        outcome.degraded_reasons.append(f"recall.content_read: {failed} memory bodies unavailable")
    return contents
