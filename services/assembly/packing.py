"""Budgeted packing of the model's context (design §3.3 steps 6-7).

Priority: the newest `recent_raw_turn_count` raw turns are always kept. Over budget, recalled
memories are cut first (lowest ranked first), then summaries (oldest first), then profile blocks
(last first). Older host messages are replaced by the summaries when there are any; otherwise as
many older turns as still fit are kept, newest first. A turn is a user message plus the
assistant/tool messages after it, so a tool call is never separated from its result.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.v1 import common_pb2, packet_pb2

from services.assembly.injection import MemoryForInjection, injected_recall_pair, summary_message
from shared.domain.messages import image_count, message_texts, tool_call_ids, tool_result_call_id
from shared.tokens import TokenCounter

IMAGE_TOKENS = 85
"""Tokens charged per image block (a low-detail image; the engine never sees the pixels)."""


@dataclass(frozen=True)
class Turn:
    start: int
    """Index of the turn's first message in the host transcript."""
    messages: tuple[common_pb2.ConversationMessage, ...]


def split_turns(messages: Sequence[common_pb2.ConversationMessage]) -> list[Turn]:
    """Turns: each USER message starts one; messages before the first user message form one.

    A tool result whose call sits in an earlier turn merges the turns in between, so a call
    and its result always land in the same turn.
    """
    if not messages:
        return []
    bounds: list[int] = []
    call_turn: dict[str, int] = {}
    for index, message in enumerate(messages):
        if not bounds or message.role == common_pb2.MESSAGE_ROLE_USER:
            bounds.append(index)
        turn = len(bounds) - 1
        for call_id in tool_call_ids(message):
            call_turn[call_id] = turn
        answered = tool_result_call_id(message)
        if answered in call_turn and call_turn[answered] < turn:
            first = call_turn[answered]
            del bounds[first + 1 :]
            for key, value in call_turn.items():
                if value > first:
                    call_turn[key] = first
    ends = [*bounds[1:], len(messages)]
    return [Turn(start, tuple(messages[start:end])) for start, end in zip(bounds, ends, strict=True)]


def _digest(message: common_pb2.ConversationMessage) -> bytes:
    return hashlib.blake2b(message.SerializeToString(deterministic=True), digest_size=16).digest()


class TokenCountCache:
    """Token counts of messages seen by earlier calls, by content. Hosts resend the whole
    transcript on every call, so after the first call only new messages are tokenized."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, key: tuple[str, bytes]) -> int | None:
        tokens = self._counts.get(key)
        if tokens is not None:
            self._counts.move_to_end(key)
        return tokens

    def put(self, key: tuple[str, bytes], tokens: int) -> None:
        self._counts[key] = tokens
        if len(self._counts) > self._capacity:
            self._counts.popitem(last=False)


class MessageTokens:
    """Token counts per message: once per message object within one call, and across calls
    through `shared` (keyed by encoding and content digest)."""

    def __init__(self, counter: TokenCounter, shared: TokenCountCache | None = None) -> None:
        self.counter = counter
        self._shared = shared
        self._cache: dict[int, tuple[common_pb2.ConversationMessage, int]] = {}

    def __call__(self, message: common_pb2.ConversationMessage) -> int:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = (self.counter.encoding_name, _digest(message))
        tokens = self._shared.get(key) if self._shared is not None else None
        if tokens is None:
            tokens = self.counter.count_message(message_texts(message)) + IMAGE_TOKENS * image_count(message)
            if self._shared is not None:
                self._shared.put(key, tokens)
        self._cache[id(message)] = (message, tokens)
        return tokens

    def total(self, messages: Sequence[common_pb2.ConversationMessage]) -> int:
        return sum(self(m) for m in messages)


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
    recalled_kept: int
    summaries: list[packet_pb2.CompactSummary]
    recent_turns: list[Turn]
    injected: list[common_pb2.ConversationMessage]
    tokens: packet_pb2.TokenAccounting
    estimated_tokens: int


def _recall_messages(plan: RecallPlan | None, keep: int) -> list[common_pb2.ConversationMessage]:
    if plan is None or keep <= 0:
        return []
    return list(injected_recall_pair(plan.query, plan.memories[:keep], plan.call_id))


def _summary_messages(summaries: Sequence[packet_pb2.CompactSummary]) -> list[common_pb2.ConversationMessage]:
    texts = [s.overview or s.abstract for s in summaries]
    return [summary_message(texts)] if any(t.strip() for t in texts) else []


def profile_text(blocks: Sequence[str]) -> str:
    return "\n\n".join(blocks)


def _ordered(
    older: Sequence[Turn],
    recent: Sequence[Turn],
    recall_msgs: Sequence[common_pb2.ConversationMessage],
    anchor: int | None,
) -> list[common_pb2.ConversationMessage]:
    """Older turns, then the recent ones with the recall pair right after `anchor` (or at the end)."""
    out: list[common_pb2.ConversationMessage] = []
    for turn in older:
        out.extend(turn.messages)
    inserted = not recall_msgs
    for turn in recent:
        for offset, message in enumerate(turn.messages):
            out.append(message)
            if not inserted and anchor == turn.start + offset:
                out.extend(recall_msgs)
                inserted = True
    if not inserted:
        out.extend(recall_msgs)
    return out


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
    recall_budget: int | None = None,
) -> PackedContext:
    """Fit everything into `budget` tokens (messages plus the system prompt addition).

    `summaries` are oldest first. `recall_anchor` is the host-transcript index after which the
    recall pair goes (None: at the end). The injected recall pair, as the model reads it (call,
    result JSON and framing), never exceeds `recall_budget` (recallTokenBudget).
    """
    recent = list(turns[-recent_raw_turn_count:]) if recent_raw_turn_count > 0 else []
    older = list(turns[: len(turns) - len(recent)])
    raw_tokens = sum(count.total(t.messages) for t in recent)

    recall_keep = len(recall.memories) if recall else 0
    summaries_kept = list(summaries)
    blocks = list(profile_blocks)

    def recall_tokens() -> int:
        return count.total(_recall_messages(recall, recall_keep))

    def summary_tokens() -> int:
        return count.total(_summary_messages(summaries_kept))

    def profile_tokens() -> int:
        return count.counter.count(profile_text(blocks))

    if recall_budget is not None:
        while recall_keep > 0 and recall_tokens() > recall_budget:
            recall_keep -= 1
    parts = {"recall": recall_tokens(), "summaries": summary_tokens(), "profile": profile_tokens()}
    while raw_tokens + sum(parts.values()) > budget:
        if recall_keep > 0:
            recall_keep -= 1
            parts["recall"] = recall_tokens()
        elif summaries_kept:
            summaries_kept.pop(0)
            parts["summaries"] = summary_tokens()
        elif blocks:
            blocks.pop()
            parts["profile"] = profile_tokens()
        else:
            break

    # Older host turns: replaced by summaries when there are any, else kept newest first while they fit.
    kept_older: list[Turn] = []
    older_tokens = 0
    if not summaries:
        room = budget - raw_tokens - sum(parts.values())
        for turn in reversed(older):
            cost = count.total(turn.messages)
            if cost > room:
                break
            kept_older.insert(0, turn)
            room -= cost
            older_tokens += cost

    recall_msgs = _recall_messages(recall, recall_keep)
    summary_msgs = _summary_messages(summaries_kept)
    out = [*summary_msgs, *_ordered(kept_older, recent, recall_msgs, recall_anchor)]

    system_prompt_addition = profile_text(blocks)
    used = count.total(out) + count.counter.count(system_prompt_addition)
    accounting = packet_pb2.TokenAccounting(
        budget=budget,
        used=used,
        profile=parts["profile"],
        recall=parts["recall"],
        summaries=parts["summaries"],
        raw_turns=raw_tokens + older_tokens,
        recalled_memories_cut=(len(recall.memories) if recall else 0) - recall_keep,
        summaries_cut=len(summaries) - len(summaries_kept),
        over_budget=raw_tokens > budget,
    )
    return PackedContext(
        messages=out,
        system_prompt_addition=system_prompt_addition,
        profile_blocks=blocks,
        recalled_kept=recall_keep,
        summaries=summaries_kept,
        recent_turns=recent,
        injected=[*summary_msgs, *recall_msgs],
        tokens=accounting,
        estimated_tokens=used,
    )
