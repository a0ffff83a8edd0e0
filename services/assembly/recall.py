"""Recall as a pipeline: query -> candidates per source -> one fused ranking -> bounded items.

1. the query (`recall_query`): the prompt drives it, less the names the user's history never
   mentions (`known_names`);
2. candidates per source (`candidates`), fetched concurrently:
   - *memories*: one semantic `find` over the user's memories, the turn index included (the
     query is embedded once; every hit carries its text), then the upstream memory rules
     (`memory_rules`, docs/design.md §3.1): level 2 only, other agents' memories dropped, score
     threshold, category+abstract dedupe, query-aware ranking;
   - *turns, semantic*: the same find's turn-index documents above the threshold;
   - *turns, lexical*: BM25 over every exchange of the user in the replica's derived index
     (`exchange_index`, the default `index`: no extra call, synced in the background; the
     semantic pool until its first sync), over the semantic pool's exchanges only
     (`candidates`), over every exchange `search/grep` finds (`grep`: exact, but OpenViking
     scans files, O(exchanges) per call), or none (`off`) (`recallLexicalSource`);
3. one ranking: reciprocal-rank fusion of the three lists (`fusion`);
4. items: a memory's abstract or body (cut at recallMaxContentChars), an exchange whole (cut
   only when it alone is longer than the recall share), sized with what packing will pay for
   each (its piece of the result JSON) up to the recall token cap; packing then decides how many
   fit the request's budget.

Which memories an agent sees is `shared.domain.memory_scope` (USER: every agent of the user;
AGENT: only the agent that stored it, ids compared exactly).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import NamedTuple, TypeVar

from contextengine.v1 import packet_pb2

from services.assembly import lexical
from services.assembly.candidates import (
    Candidate,
    CandidatePool,
    lexical_turns,
    merge_candidates,
    semantic_turns,
    split_hits,
)
from services.assembly.drawn import Drawn
from services.assembly.exchange_focus import focused, folded_terms
from services.assembly.exchange_index import ExchangeIndex, IndexedExchange
from services.assembly.fusion import reciprocal_rank_fusion
from services.assembly.injection import MemoryForInjection
from services.assembly.known_names import without_unrelated_names
from services.assembly.memory_rules import rank_candidates, select_candidates, truncate_content
from services.assembly.pool_depth import PoolDepths, memory_find
from services.assembly.ports import MemorySearch
from services.assembly.recall_json import item_piece
from services.assembly.send_order import requests_out
from services.assembly.skill_pool import SkillPool, hand_over, pool_skills
from shared.config import Settings
from shared.domain.turn_index import TURN_INDEX_ROOT, document_date, said_from_tags, undated
from shared.errors import BackendNotFound, BackendTimeout, ContextEngineError
from shared.openviking.models.search import FindResult
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

USER_MEMORIES_URI = "viking://~/memories"
EXPLICIT_RECALL_TOKENS = 2000
"""Token cap of explicit and fallback recall when recallTokenBudget sets none (upstream default)."""
TURN_CANDIDATES = 200
"""Semantic pool: enough to fill an 8k-token budget and to give BM25 a corpus (400 measured the
same on the hard recall tier, within 0.3 points, and cost Assemble more CPU)."""
LEXICAL_CANDIDATES = 200
"""The exchange index's best BM25 matches fused with the semantic pool (the same depth)."""
WHOLE_EXCHANGES_FROM = 6000
"""Recall shares of at least this many tokens show recalled exchanges whole instead of only their
messages that share a word with the query (`exchange_focus`). The focus pays where room is short
and costs where it is not: a message that answers in other words than the question's is cut
with its reply. Measured on the hard recall tier (conversation 1, new session), focused / whole:
1k 80.7 / 67.9 %, 2k 85.9 / 82.9 %, 4k 92.4 / 92.7 %, 8k 97.9 / 99.1 % (asked by nickname, 8k:
96.6 / 99.1 %)."""
SHOWN_HEADROOM = 2
"""How much more than its cap auto recall offers packing (which cuts to the exact room)."""
CHARS_PER_TOKEN = 3
"""A conservative characters-per-token for cutting an over-long exchange before it is counted."""
T = TypeVar("T")


@dataclass(frozen=True)
class RecallConfig:
    limit: int
    score_threshold: float
    max_content_chars: int
    prefer_abstract: bool
    lexical_source: str
    """`index`, `candidates`, `grep` or `off` (recallLexicalSource)."""
    token_budget: int
    """What the items may cost in the result JSON (auto recall: twice its cap, packing fits them)."""
    max_items: int = 0
    """Cap on the number of items (0: none)."""
    max_turn_chars: int = 0
    """Longest exchange text kept whole (0: no cut): an exchange is cut only when it alone
    would take more than the recall share of the budget."""
    focus_exchanges: bool = True
    """Show an exchange's messages that share a word with the query only (`exchange_focus`)."""

    @classmethod
    def from_settings(
        cls, settings: Settings, *, limit: int = 0, budget: int = 0, transcript_shows: bool = True
    ) -> RecallConfig:
        """Auto recall fills up to `budget` (the request's) unless recallTokenBudget caps it lower;
        explicit and fallback recall (no `budget`) return at most `limit` items within
        recallTokenBudget, or the upstream 2,000 tokens when none is set. `transcript_shows`:
        the host's transcript holds messages before the prompt (raw exchanges packing may show)."""
        cap = settings.recall_token_budget
        token_budget = min(cap or budget, budget) if budget else cap or EXPLICIT_RECALL_TOKENS
        share = int(token_budget * (settings.recall_budget_share if budget else 1.0))
        return cls(
            limit=limit or settings.recall_limit,
            score_threshold=settings.recall_score_threshold,
            max_content_chars=settings.recall_max_content_chars,
            prefer_abstract=settings.recall_prefer_abstract,
            lexical_source=settings.recall_lexical_source,
            # Auto recall offers packing more than fits: packing leaves out what the host's
            # transcript already shows (in a continuing session its own exchanges rank high), and
            # the rest must still fill the room. A prompt alone shows no exchange.
            token_budget=token_budget * (SHOWN_HEADROOM if transcript_shows else 1)
            if budget
            else token_budget,
            max_items=0 if budget else limit or settings.recall_limit,
            max_turn_chars=share * CHARS_PER_TOKEN,
            focus_exchanges=share < WHOLE_EXCHANGES_FROM,
        )

    @property
    def candidate_limit(self) -> int:
        return max(self.limit * 4, 20)


class RecalledItem(NamedTuple):
    candidate: Candidate
    rank: float
    content: str
    shown_as: MemoryForInjection | None = None
    """What the model is shown of it, once sized (`within_token_budget`)."""

    @property
    def said_at(self) -> str:
        """When it was said: a turn's first line, a stored memory's `said=` tag ("" if unknown)."""
        c = self.candidate
        return document_date(c.body) if c.kind == "turn" else said_from_tags(c.tags)

    def for_injection(self) -> MemoryForInjection:
        if self.shown_as is not None:
            return self.shown_as
        c = self.candidate
        return MemoryForInjection(c.uri, c.category, self.content, c.score, kind=c.kind, said_at=self.said_at)

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
            kind=c.kind,
            said_at=self.said_at,
        )


@dataclass
class RecallOutcome:
    query: str
    items: Sequence[RecalledItem] = field(default_factory=list)
    """Best first; auto recall's are built as packing reads them (`drawn.Drawn`)."""
    degraded_reasons: list[str] = field(default_factory=list)


def within_token_budget(
    items: Iterable[RecalledItem], counter: TokenCounter, budget: int
) -> Iterator[RecalledItem]:
    """Items in order while what packing pays for them (their pieces of the result JSON) fits
    `budget`; the first always does. Each is sized when it is drawn (`drawn.Drawn`)."""
    used = 0
    for number, item in enumerate(items):
        shown_as = item.for_injection()
        tokens = counter.count(item_piece(shown_as))
        if number and used + tokens > budget:
            return
        used += tokens
        yield RecalledItem(item.candidate, item.rank, item.content, shown_as)


def describe_failure(what: str, exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | BackendTimeout):  # the call's deadline or OpenViking's
        return f"{what}: timed out"
    if isinstance(exc, ContextEngineError):
        return f"{what}: {type(exc).__name__}: {exc.message}"
    return f"{what}: {type(exc).__name__}"


async def bounded(aw: Awaitable[T], deadline: float) -> T:
    """Await `aw`, giving up (TimeoutError) at the absolute monotonic `deadline`. In the calling
    task (no task of its own, unlike `wait_for`): a call started now is sent now."""
    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
        return await aw


def content_of(candidate: Candidate, config: RecallConfig, terms: frozenset[str] = frozenset()) -> str:
    """What the model is shown: an exchange's messages that say what was asked (`exchange_focus`,
    while room is short: `focus_exchanges`; the item carries its date once, so the lines do not),
    cut only past `max_turn_chars`; a memory's abstract when preferred, else its body, cut at
    `max_content_chars`."""
    if candidate.kind == "turn":
        text = focused(undated(candidate.body), terms if config.focus_exchanges else frozenset())
        return truncate_content(text, config.max_turn_chars) if config.max_turn_chars else text.strip()
    if config.prefer_abstract and candidate.abstract.strip():
        return truncate_content(candidate.abstract, config.max_content_chars)
    return truncate_content(candidate.body or candidate.abstract, config.max_content_chars)


def distinct(items: Iterable[RecalledItem]) -> Iterator[RecalledItem]:
    """`items` in order, less any whose text (roles aside, case and spacing folded) an earlier
    one already shows: small talk recurs word for word across sessions ("There's a workshop on
    tax returns at the library"), and a second copy tells the model nothing. Measured on the hard
    recall tier: four copies of one line among a 1k context's 19 items; leaving the copies out
    moved evidence recall at 1k from 74.9 to 80.4 %."""
    seen: set[str] = set()
    for item in items:
        key = _said(item.content)
        if key not in seen:
            seen.add(key)
            yield item


_ROLE_LABEL = re.compile(r"^(?:user|assistant|tool|system): ", re.MULTILINE)
DISTINCT_KEYS_KEPT = 8_192
"""Items whose folded text a process remembers (the same exchanges are recalled call after call)."""


def _items(
    fused: Iterable[tuple[str, float]],
    pool: CandidatePool,
    exclude_uris: Container[str],
    config: RecallConfig,
    focus: frozenset[str],
) -> Iterator[RecalledItem]:
    """The fused ranking's items with something to show, best first; an exchange whose text
    (dates aside) an earlier one has is passed over before its item is built (`distinct` would
    leave it out: at 10,000 stored exchanges ~85 of the ~190 items packing reached per Assemble
    were such repeats of small talk)."""
    exchanges: set[str] = set()
    for uri, rank in fused:
        if uri in exclude_uris:
            continue
        candidate = pool[uri]
        if candidate.kind == "turn":
            said = undated(candidate.body)
            if said in exchanges:
                continue
            exchanges.add(said)
        content = content_of(candidate, config, focus)
        if content:
            yield RecalledItem(candidate, rank, content)


class _IndexTexts:
    """The texts of the exchanges only the index matched, read from it as their items are built."""

    def __init__(
        self, index: ExchangeIndex | None, tenant: Tenant, hits: Sequence[IndexedExchange] | None
    ) -> None:
        self._index, self._tenant = index, tenant
        self._hits = {hit.uri: hit for hit in hits or ()}

    def read(self, uri: str) -> str:
        hit = self._hits.get(uri)
        if hit is None or self._index is None:
            return ""
        return self._index.text(self._tenant, hit) or ""


@lru_cache(maxsize=DISTINCT_KEYS_KEPT)
def _said(content: str) -> str:
    """What an item says, roles aside, case and spacing folded."""
    return " ".join(_ROLE_LABEL.sub("", content).lower().split())


async def _leg(what: str, call: Awaitable[T], deadline: float, outcome: RecallOutcome) -> T | None:
    """One source's call; a failure is a degraded reason, a missing index is simply nothing."""
    try:
        return await bounded(call, deadline)
    except BackendNotFound:
        return None
    except Exception as exc:
        outcome.degraded_reasons.append(describe_failure(what, exc))
        return None


async def recall_memories(
    client: MemorySearch,
    *,
    tenant: Tenant,
    agent_id: str,
    query: str,
    config: RecallConfig,
    counter: TokenCounter,
    deadline: float,
    exclude_uris: Container[str] = frozenset(),
    exchanges: ExchangeIndex | None = None,
    skill_pool: SkillPool | None = None,
    depths: PoolDepths | None = None,
) -> RecallOutcome:
    """Retrieve, fuse and bound memories and raw turns for `query`; failures degrade to fewer.
    `exclude_uris` is read as the items are built (it may still grow until then).
    With `skill_pool`, the semantic `find` searches the skill space too when it embeds `query`
    as given, and resolves the pool with its skill hits (`skill_pool`); the pool is resolved
    (None: the skill stage finds on its own) whatever becomes of recall. `depths`: how deep that
    shared `find` reaches into the user's memories (`pool_depth`; None: always the full depth)."""
    try:
        outcome = RecallOutcome(query)
        refined = without_unrelated_names(query, exchanges, tenant)
        if refined.text != query:  # the pool is for `query` as asked (a skill's name stays in it)
            hand_over(skill_pool, None)
            skill_pool = None
        terms = lexical.content_terms(refined.text)
        semantic_call = memory_find(
            client, tenant, refined.text, root=USER_MEMORIES_URI, full_depth=TURN_CANDIDATES,
            skill_pool=skill_pool, depths=depths, deadline=deadline,
        )  # fmt: skip
        lexical_call = client.grep(
            tenant, TURN_INDEX_ROOT, lexical.grep_pattern(terms), case_insensitive=True,
            node_limit=lexical.MATCH_LIMIT, before_context=lexical.CONTEXT_LINES,
            after_context=lexical.CONTEXT_LINES, deadline=deadline,
        ) if terms and config.lexical_source == "grep" else None  # fmt: skip
        # The legs' requests go out first, then the summaries' and the profile's reads (retrieval's
        # other parts, `send_order`); the exchange index is searched while OpenViking answers.
        # A leg reports its failure, it never raises.
        async with asyncio.TaskGroup() as legs:
            semantic = legs.create_task(_leg("recall.semantic", semantic_call, deadline, outcome))
            grep = None if lexical_call is None else legs.create_task(
                _leg("recall.lexical", lexical_call, deadline, outcome)
            )  # fmt: skip
            await requests_out()
            indexed = (
                exchanges.search(tenant, terms, LEXICAL_CANDIDATES)
                if exchanges is not None and config.lexical_source == "index" and terms
                else None
            )
        paged, grepped = semantic.result(), None if grep is None else grep.result()
        found = paged.found if paged is not None else FindResult()
        hand_over(skill_pool, pool_skills(found, paged.limit) if paged is not None else None)
        stored, turn_hits = split_hits(found.memories[:TURN_CANDIDATES])
        memories = merge_candidates([stored], agent_id)
        selected = select_candidates(memories, config.score_threshold, config.candidate_limit)
        ranked_memories = [c for c, _ in rank_candidates(selected, query)[: config.limit]]
        dense = semantic_turns(turn_hits, config.score_threshold)
        matched = lexical_turns(terms, dense, grepped, indexed) if config.lexical_source != "off" else []
        pool = CandidatePool(ranked_memories, dense, matched, _IndexTexts(exchanges, tenant, indexed).read)
        focus = folded_terms(terms)
        fused = reciprocal_rank_fusion(
            [[c.uri for c in ranked_memories], [h.uri for h in dense], [uri for uri, _ in matched]]
        )
        # Built lazily, best first: fitting the token cap stops at the first item past it.
        items = _items(fused, pool, exclude_uris, config, focus)
        kept = islice(distinct(items), config.max_items or None)
        outcome.items = Drawn(within_token_budget(kept, counter, config.token_budget))
        return outcome
    finally:
        hand_over(skill_pool, None)  # a no-op once the find's result was handed over
