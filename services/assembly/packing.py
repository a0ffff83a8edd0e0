"""Budgeted packing of the model's context (docs/design.md §3.3 steps 5-6, with the budget rule of the
lossless-recall issue).

The total never exceeds the request's budget when the newest exchange alone fits; only then is
a context over budget, and flagged. What fills the budget, in this order, each part taking what
still fits:

1. the newest exchange (a user message and everything after it), always;
2. profile blocks, then compact summaries (newest first);
3. recalled items best first, up to `recall_share` of the budget (and the `recall_cap`);
4. the rest of the recent raw window (`recent_raw_turn_count` exchanges), newest first, shrunk
   from its oldest end when it does not fit; older tool outputs longer than
   `elision_limit(budget)` tokens have their middle elided, with a pointer `memory_expand`
   resolves;
5. more recalled items, up to the cap;
6. older raw exchanges, newest first, when there are no summaries standing in for them.

Recalled raw exchanges already in the recent window are left out. A turn is a user message plus
the assistant/tool messages after it, so a tool call is never separated from its result, and raw
turns always form one contiguous tail of the transcript.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextengine.v1 import common_pb2, packet_pb2

from services.assembly.drawn import Drawn
from services.assembly.elision import Pointer, elide_turn, elision_limit
from services.assembly.injection import (
    AUTO_RECALL_SOURCE,
    AUTO_RECALL_TOOL,
    MemoryForInjection,
    recall_pair,
    summary_message,
)
from services.assembly.recall_json import item_piece, pieces_tokens, recall_json_pieces
from services.assembly.shown import ShownExchanges
from services.assembly.token_counts import MessageTokens
from shared.domain.turns import Turn

DEFAULT_RECALL_SHARE = 0.9


@dataclass(frozen=True)
class RecallPlan:
    query: str
    call_id: str
    memories: Sequence[MemoryForInjection]
    """Best first; cut from the end."""


@dataclass
class PackedContext:
    messages: list[common_pb2.ConversationMessage]
    system_prompt_addition: str
    profile_blocks: list[str]
    recalled_kept: list[int]
    """Indexes into the plan's memories of the items injected, best first."""
    summaries: list[packet_pb2.CompactSummary]
    recent_turns: list[Turn]
    """Every raw host turn in the context, oldest first."""
    injected: list[common_pb2.ConversationMessage]
    tokens: packet_pb2.TokenAccounting
    estimated_tokens: int


def _summary_messages(summaries: Sequence[packet_pb2.CompactSummary]) -> list[common_pb2.ConversationMessage]:
    texts = [expandable(s) for s in summaries if (s.overview or s.abstract).strip()]
    return [summary_message(texts)] if texts else []


def expandable(summary: packet_pb2.CompactSummary) -> str:
    """The summary as the model reads it, with what `memory_expand` takes to get its raw turns."""
    reference = summary.checkpoint_id or summary.archive_uri or summary.session_uri
    text = (summary.overview or summary.abstract).strip()
    return f'{text}\n(raw turns: memory_expand("{reference}"))' if reference else text


def profile_text(blocks: Sequence[str]) -> str:
    return "\n\n".join(blocks)


def _ordered(
    raw: Sequence[Turn],
    recall_msgs: Sequence[common_pb2.ConversationMessage],
    anchor: int | None,
) -> list[common_pb2.ConversationMessage]:
    """The raw turns with the recall pair right after `anchor` (or at the end)."""
    out: list[common_pb2.ConversationMessage] = []
    inserted = not recall_msgs
    for turn in raw:
        for offset, message in enumerate(turn.messages):
            out.append(message)
            if not inserted and anchor == turn.start + offset:
                out.extend(recall_msgs)
                inserted = True
    if not inserted:
        out.extend(recall_msgs)
    return out


class _RecallCosts:
    """Token cost of the injected pair for a set of items: exact base + per-item increments. The
    result's JSON is counted by its pieces (`services.assembly.recall_json`): exactly, and each
    item's piece once per process."""

    def __init__(self, plan: RecallPlan | None, count: MessageTokens) -> None:
        self._plan = plan
        self._count = count
        self._items: dict[int, int] = {}
        self._last: tuple[tuple[int, ...], list[common_pb2.ConversationMessage]] = ((), [])
        self.base = self.exact([0]) - self.item(0) if plan and plan.memories else 0

    def item(self, index: int) -> int:
        """What item `index` adds to the JSON, ` "...",` (counted when first asked: packing
        stops at the first item that does not fit, so most are never counted)."""
        tokens = self._items.get(index)
        if tokens is None:
            assert self._plan is not None
            tokens = self._count.counter.count(item_piece(self._plan.memories[index]))
            self._items[index] = tokens
        return tokens

    def messages(self, kept: Sequence[int]) -> list[common_pb2.ConversationMessage]:
        if self._plan is None or not kept:
            return []
        if tuple(kept) != self._last[0]:
            memories = [self._plan.memories[i] for i in kept]
            pieces = recall_json_pieces(memories, AUTO_RECALL_SOURCE)
            call, result = recall_pair(self._plan.query, "".join(pieces), self._plan.call_id)
            counter = self._count.counter
            json_tokens = pieces_tokens(counter, pieces)
            self._count.remember(result, counter.count_message([AUTO_RECALL_TOOL]) + json_tokens)
            self._last = (tuple(kept), [call, result])
        return self._last[1]

    def exact(self, kept: Sequence[int]) -> int:
        return self._count.total(self.messages(kept))


def _fit_profile(blocks: Sequence[str], count: MessageTokens, room: int) -> list[str]:
    kept: list[str] = []
    for block in blocks:
        if count.counter.count(profile_text([*kept, block])) <= room:
            kept.append(block)
    return kept


def _fit_summaries(
    summaries: Sequence[packet_pb2.CompactSummary], count: MessageTokens, room: int
) -> list[packet_pb2.CompactSummary]:
    """The newest summaries whose message fits `room` (oldest first)."""
    kept: list[packet_pb2.CompactSummary] = []
    for summary in reversed(summaries):
        if count.total(_summary_messages([summary, *kept])) <= room:
            kept.insert(0, summary)
    return kept


@dataclass
class _Fill:
    """The running state of one packing: what is kept and the room left."""

    room: int
    costs: _RecallCosts
    offered: Callable[[int], bool]
    """Whether recall offers an item `index` (best first; `Drawn.has`: built when first asked)."""
    shown: Callable[[int], bool]
    """Whether the raw turns kept so far show item `index` (it is then left out)."""
    cap: int
    raw: list[Turn]
    kept: list[int]
    recall_tokens: int = 0

    def recall(self, limit: int) -> None:
        """Add recalled items best first while the pair stays within `limit` (and the cap)."""
        for index in itertools.count():
            if not self.offered(index):
                return
            if index in self.kept or self.shown(index):
                continue
            added = self.costs.item(index) + (0 if self.kept else self.costs.base)
            if self.recall_tokens + added > min(limit, self.cap) or added > self.room:
                return
            self.kept.append(index)
            self.recall_tokens += added
            self.room -= added

    def forget_shown(self) -> None:
        """Drop kept items whose exchange is now shown raw."""
        for index in [i for i in self.kept if self.shown(i)]:
            self.kept.remove(index)
            added = self.costs.item(index) + (0 if self.kept else self.costs.base)
            self.recall_tokens -= added
            self.room += added

    def raw_turns(
        self, turns: Sequence[Turn], count: MessageTokens, limit: int, pointer: Pointer | None
    ) -> bool:
        """Prepend `turns` newest first while they fit; False when one did not."""
        for turn in reversed(turns):
            shorter = elide_turn(turn, count, limit, pointer)
            cost = count.total(shorter.messages)
            if cost > self.room:
                return False
            self.raw.insert(0, shorter)
            self.room -= cost
        return True


def pack_context(
    *,
    budget: int,
    turns: Sequence[Turn],
    recent_raw_turn_count: int,
    count: MessageTokens,
    profile_blocks: Sequence[str] = (),
    summaries: Sequence[packet_pb2.CompactSummary] = (),
    recall: RecallPlan | None = None,
    recall_anchor: int | None = None,
    recall_cap: int = 0,
    recall_share: float = DEFAULT_RECALL_SHARE,
    pointer: Pointer | None = None,
) -> PackedContext:
    """Fit everything into `budget` tokens (messages plus the system prompt addition).

    `summaries` are oldest first. `recall_anchor` is the host-transcript index after which the
    recall pair goes (None: at the end). The injected recall pair, as the model reads it (call,
    result JSON and framing), never exceeds `recall_cap` (recallTokenBudget; 0 = no cap).
    """
    newest = list(turns[-1:])
    window = list(turns[-max(1, recent_raw_turn_count) : -1]) if len(turns) > 1 else []
    older = list(turns[: len(turns) - len(newest) - len(window)])
    over_budget = sum(count.total(t.messages) for t in newest) > budget
    room = 0 if over_budget else budget - sum(count.total(t.messages) for t in newest)
    blocks = _fit_profile(profile_blocks, count, room)
    profile_tokens = count.counter.count(profile_text(blocks))
    summaries_kept = _fit_summaries(summaries, count, room - profile_tokens)
    summary_tokens = count.total(_summary_messages(summaries_kept))
    costs = _RecallCosts(recall, count)
    memories = Drawn.of(recall.memories if recall else [])
    shown = ShownExchanges(memories)
    fill = _Fill(
        room=room - profile_tokens - summary_tokens,
        costs=costs,
        offered=memories.has,
        shown=shown.by([*window, *newest]),
        cap=recall_cap or budget,
        raw=list(newest),
        kept=[],
    )
    limit = elision_limit(budget)
    fill.recall(int(budget * recall_share))
    whole_window = fill.raw_turns(window, count, limit, pointer)
    # Against the raw turns as kept (elided, and without the window turns that did not fit).
    fill.shown = shown.by(fill.raw)
    fill.recall(budget)
    if not summaries and whole_window:
        fill.raw_turns(older, count, limit, pointer)
        # Against every raw turn now kept, not the older ones alone: one message of an exchange
        # may be among the newer turns and the other among the older (found by the property test).
        fill.shown = shown.by(fill.raw)
        fill.forget_shown()
        fill.recall(budget)
    fill.kept.sort()  # best first, whichever fill added them
    # The per-item costs are close, not exact: trim until the exact total fits.
    fixed = summary_tokens + profile_tokens
    while (
        fill.kept
        and count.total(_ordered(fill.raw, costs.messages(fill.kept), recall_anchor)) + fixed > budget
    ):
        fill.kept.pop()
    recall_msgs = costs.messages(fill.kept)
    summary_msgs = _summary_messages(summaries_kept)
    out = [*summary_msgs, *_ordered(fill.raw, recall_msgs, recall_anchor)]
    system_prompt_addition = profile_text(blocks)
    used = count.total(out) + count.counter.count(system_prompt_addition)
    accounting = packet_pb2.TokenAccounting(
        budget=budget,
        used=used,
        profile=profile_tokens,
        recall=count.total(recall_msgs),
        summaries=summary_tokens,
        raw_turns=sum(count.total(t.messages) for t in fill.raw),
        recalled_memories_cut=memories.drawn - len(fill.kept),
        summaries_cut=len(summaries) - len(summaries_kept),
        over_budget=over_budget,
    )
    return PackedContext(
        messages=out,
        system_prompt_addition=system_prompt_addition,
        profile_blocks=blocks,
        recalled_kept=fill.kept,
        summaries=summaries_kept,
        recent_turns=fill.raw,
        injected=[*summary_msgs, *recall_msgs],
        tokens=accounting,
        estimated_tokens=used,
    )
