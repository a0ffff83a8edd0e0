"""Assemble, explicit recall and fallback recall as plain async functions over plain data.

Assemble is a pipeline (`assemble_context`): query, retrieval sent off, the host transcript taken
up while it is in flight, packing, packet. Retrieval (`services.assembly.retrieval`) is bounded
by one deadline derived from the caller's and `recall_timeout_ms`; a failed or slow part is left
out and reported (`degraded`), and the host's newest raw turns are always returned.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextengine.v1 import common_pb2, packet_pb2

from services.assembly.context_sources import ContextSources, SourceCaches, wants_skills
from services.assembly.drawn import Drawn
from services.assembly.envelopes import EnvelopeCache, turn_envelopes
from services.assembly.exchange_index import ExchangeIndex
from services.assembly.fallback import relevant_memories_block
from services.assembly.injection import (
    EXPLICIT_RECALL_SOURCE,
    recall_tool_result_json,
    tool_call_id_for,
)
from services.assembly.packing import RecallPlan, pack_context
from services.assembly.pool_depth import PoolDepths
from services.assembly.ports import AssemblyBackend, MemorySearch
from services.assembly.profile import ProfileCache
from services.assembly.recall import (
    RecallConfig,
    RecalledItem,
    RecallOutcome,
    bounded,
    describe_failure,
    recall_memories,
)
from services.assembly.recall_intent import recall_intent
from services.assembly.recall_query import RecallQuery, sanitize_user_text, skip_reason_for
from services.assembly.retrieval import Retrieval
from services.assembly.send_order import requests_out
from services.assembly.summaries import SummarySource
from services.assembly.token_counts import MessageTokens, TokenCountCache
from shared.config import Settings
from shared.domain.envelope import turn_id_for
from shared.domain.host_messages import (
    HostMessageCache,
    newest_own_messages,
    own_host_transcript,
)
from shared.domain.identity import RequestIdentity
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

DEADLINE_RESERVE_FRACTION = 0.2
"""Share of the caller's remaining time kept for packing and the reply."""
MIN_RETRIEVAL_SECONDS = 0.01
INTENT_MESSAGES = 64
"""Newest host messages the recall intent reads (the recall query's window lies within them)."""
FOLLOW_UP_RECALL_SHARE = 0.5
"""The most of the budget recall takes before the recent raw turns when the prompt leans on them."""
WINDOW_FROM_TOKENS = 1500
"""Budgets from which a standalone prompt's recall leaves the configured share to the recent raw
window; below, recall takes what it needs first and the window what is left (`recall_share`)."""


def recall_share(configured: float, query: RecallQuery, budget: int) -> float:
    """How much of the budget recall takes before the recent raw window: at most half for a
    prompt that leans on the turns before it ("and what about her?"), which the raw window
    shows; for one that stands alone the configured share (recallBudgetShare), all of it below
    `WINDOW_FROM_TOKENS`.

    *Departs from the original design's fixed recent window on measured grounds* (the recall
    issue): on the hard recall tier's continuing session (standalone questions at the end of a
    session), 0.75 let the window take ~200 of 1,000 tokens and evidence recall was 78.0 % at 1k
    (conversation 1), 0.9 gives 82.6 %; 1.0, no window, lost 1-4 points at 2k-8k (the window
    shows the session's own turns more cheaply than recall does) and gained 2 at 1k, where 10 %
    of the budget holds one exchange (3 conversations, 1k / 2k / 4k / 8k: 0.9 73.0 / 88.3 / 96.5
    / 99.4 %, 1.0 75.1 / 86.9 / 92.3 / 95.1 %)."""
    if query.leans_on_earlier:
        return min(configured, FOLLOW_UP_RECALL_SHARE)
    return configured if budget >= WINDOW_FROM_TOKENS else 1.0


def retrieval_deadline(now: float, time_remaining: float | None, recall_timeout_ms: int) -> float:
    """Absolute monotonic deadline for retrieval: recall_timeout_ms, capped by the caller's deadline."""
    budget = recall_timeout_ms / 1000.0
    if time_remaining is not None:
        budget = min(budget, max(MIN_RETRIEVAL_SECONDS, time_remaining * (1 - DEADLINE_RESERVE_FRACTION)))
    return now + budget


@dataclass
class AssembleResult:
    messages: list[common_pb2.ConversationMessage]
    system_prompt_addition: str
    estimated_tokens: int
    packet: packet_pb2.AssembledContextPacket


def _recall_anchor(messages: Sequence[common_pb2.ConversationMessage], prompt: str) -> int | None:
    """Index after which the recall pair goes: the newest user message, or None (the end) when
    the prompt is not yet in the transcript."""
    last_user = None
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == common_pb2.MESSAGE_ROLE_USER:
            last_user = index
            break
    if last_user is None:
        return None
    if prompt.strip():
        text = sanitize_user_text(
            "\n".join(b.text.text for b in messages[last_user].content if b.HasField("text"))
        )
        if text != sanitize_user_text(prompt):
            return None
    return last_user


@dataclass(frozen=True)
class AssembleCaches:
    """What a replica reuses across Assembles."""

    host_messages: HostMessageCache
    token_counts: TokenCountCache
    profiles: ProfileCache
    envelopes: EnvelopeCache
    exchanges: ExchangeIndex | None = None
    """The lexical leg's index of every user's exchanges (None: BM25 over the semantic pool)."""
    sources: SourceCaches = field(default_factory=SourceCaches)
    depths: PoolDepths = field(default_factory=PoolDepths)
    """How deep recall's `find` reaches into each user's memories beside the skills."""


async def assemble_context(
    client: AssemblyBackend,
    summary_source: SummarySource,
    settings: Settings,
    identity: RequestIdentity,
    wires: Sequence[bytes],
    *,
    caches: AssembleCaches,
    token_budget: int,
    model: str,
    prompt: str,
    deadline: float,
) -> AssembleResult:
    """The model's context for this call, as a pipeline over the host's messages (`wires`, less
    what the engine injected into an earlier answer: this call injects its own):

    1. the recall intent (`services.assembly.recall_intent`): recall or not, its sources, the query,
       from the prompt and the newest messages only;
    2. retrieval (profile, recall, summaries) and the sources (skills, tools, directory) sent off;
    3. the host transcript taken up (injections dropped, decoded, validated, split into turns)
       while it is in flight (step 1 reads only the transcript's tail);
    4. packing into the budget, once retrieval is in;
    5. the packet that says what was chosen and why.
    """
    budget = token_budget or settings.default_token_budget
    counter = TokenCounter.for_model(model, settings.default_encoding)
    recent = newest_own_messages(wires, caches.host_messages, INTENT_MESSAGES)
    intent = recall_intent(recent, settings.assemble_recall_window, prompt, auto_recall=settings.auto_recall)
    query = intent.as_recall_query()
    retrieval = Retrieval.start(
        client,
        summary_source,
        settings,
        identity,
        query,
        counter=counter,
        budget=budget,
        deadline=deadline,
        profiles=caches.profiles,
        exchanges=caches.exchanges,
        depths=caches.depths,
        with_skills=wants_skills(intent),
        transcript_shows=len(recent) > 1,
    )
    sources = ContextSources.start(
        client,
        identity.tenant,
        intent,
        prompt,
        recent,
        caches=caches.sources,
        skill_pool=retrieval.skill_pool,
        deadline=deadline,
    )
    await requests_out()
    try:
        transcript = own_host_transcript(wires, caches.host_messages, identity.buffer_key)
    except BaseException:
        retrieval.abandon()
        sources.abandon()
        raise
    retrieved = await retrieval.collect()
    section = await sources.collect(counter, budget, settings.recall_token_budget)
    outcome = retrieved.recall
    plan = None
    if outcome is not None and outcome.items:
        plan = RecallPlan(
            query=outcome.query,
            call_id=tool_call_id_for(
                identity.tenant.account_id, identity.tenant.user_id, identity.stream_id, outcome.query
            ),
            memories=Drawn.of(outcome.items).map(RecalledItem.for_injection),
        )
    packed = pack_context(
        budget=budget - section.tokens,
        turns=transcript.turns,
        recent_raw_turn_count=settings.recent_raw_turn_count,
        count=MessageTokens(counter, caches.token_counts, transcript.keys),
        profile_blocks=retrieved.profile.blocks,
        summaries=retrieved.summaries,
        recall=plan,
        recall_anchor=_recall_anchor(transcript.messages, prompt),
        recall_cap=settings.recall_token_budget,
        recall_share=recall_share(settings.recall_budget_share, query, budget),
        pointer=lambda position, message: turn_id_for(identity.stream_id, position, message),
    )
    recalled = [outcome.items[i] for i in packed.recalled_kept] if outcome else []
    skip_reason = query.skip_reason
    if not skip_reason and outcome is not None and not outcome.items:
        skip_reason = "recall_failed" if outcome.degraded_reasons else "no_memories"
    packet = packet_pb2.AssembledContextPacket(
        profile_blocks=packed.profile_blocks,
        recalled_memories=[item.to_proto(query.query) for item in recalled],
        compact_summaries=packed.summaries,
        recent_raw_turns=turn_envelopes(packed.recent_turns, identity, caches.envelopes, transcript.keys),
        injected_messages=packed.injected,
        estimated_tokens=packed.estimated_tokens,
        tokens=packed.tokens,
        recall_query=query.query,
        recall_skip_reason=skip_reason,
        degraded=bool(retrieved.degraded_reasons or section.degraded_reasons),
        degraded_reasons=[*retrieved.degraded_reasons, *section.degraded_reasons],
        recall_intent=intent.to_proto(),
    )
    addition = section.add_to(packet, budget, packed.system_prompt_addition)
    if packet.degraded:
        log.warning(
            "assemble degraded for stream %s: %s", identity.stream_id, "; ".join(packet.degraded_reasons)
        )
    return AssembleResult(packed.messages, addition, packet.estimated_tokens, packet)


@dataclass
class RecallResult:
    memories: list[packet_pb2.RecalledMemory]
    tool_result_json: str
    degraded: bool
    degraded_reasons: list[str]


async def recall_for_tool(
    client: MemorySearch,
    settings: Settings,
    identity: RequestIdentity,
    query: str,
    *,
    limit: int,
    deadline: float,
    exchanges: ExchangeIndex | None = None,
) -> RecallResult:
    """Explicit memory_recall: the same retrieval and ranking, the same tool-result shape."""
    counter = TokenCounter.for_model("", settings.default_encoding)
    outcome = await _bounded_recall(
        client,
        identity=identity,
        query=query,
        config=RecallConfig.from_settings(settings, limit=limit),
        counter=counter,
        deadline=deadline,
        exchanges=exchanges,
    )
    return RecallResult(
        memories=[item.to_proto(query) for item in outcome.items],
        tool_result_json=recall_tool_result_json(
            [i.for_injection() for i in outcome.items], EXPLICIT_RECALL_SOURCE
        ),
        degraded=bool(outcome.degraded_reasons),
        degraded_reasons=outcome.degraded_reasons,
    )


@dataclass
class FallbackResult:
    prepend_context: str
    memories: list[packet_pb2.RecalledMemory]
    estimated_tokens: int
    degraded: bool


async def recall_fallback_block(
    client: MemorySearch,
    settings: Settings,
    identity: RequestIdentity,
    prompt: str,
    *,
    deadline: float,
    exchanges: ExchangeIndex | None = None,
) -> FallbackResult:
    """The legacy `<relevant-memories>` block for `prompt` ("" when skipped or nothing found)."""
    text = sanitize_user_text(prompt)
    if skip_reason_for(text):
        return FallbackResult("", [], 0, False)
    counter = TokenCounter.for_model("", settings.default_encoding)
    outcome = await _bounded_recall(
        client,
        identity=identity,
        query=text,
        config=RecallConfig.from_settings(settings),
        counter=counter,
        deadline=deadline,
        exchanges=exchanges,
    )
    block = relevant_memories_block(outcome.items)
    return FallbackResult(
        prepend_context=block,
        memories=[item.to_proto(text) for item in outcome.items],
        estimated_tokens=counter.count(block),
        degraded=bool(outcome.degraded_reasons),
    )


async def _bounded_recall(
    client: MemorySearch,
    *,
    identity: RequestIdentity,
    query: str,
    config: RecallConfig,
    counter: TokenCounter,
    deadline: float,
    exchanges: ExchangeIndex | None,
) -> RecallOutcome:
    try:
        return await bounded(
            recall_memories(
                client,
                tenant=identity.tenant,
                agent_id=identity.agent_id,
                query=query,
                config=config,
                counter=counter,
                deadline=deadline,
                exchanges=exchanges,
            ),
            deadline,
        )
    except Exception as exc:
        return RecallOutcome(query, degraded_reasons=[describe_failure("recall", exc)])
