"""Budgeted packing: the budget rule of `services.assembly.packing` as properties over random
transcripts (worked examples of each step of the fill order: `test_packing_cases`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextengine.v1 import common_pb2, packet_pb2
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from services.assembly.elision import elision_limit
from services.assembly.injection import MemoryForInjection, is_engine_injected, summary_message
from services.assembly.packing import PackedContext, RecallPlan, expandable, pack_context, profile_text
from services.assembly.token_counts import MessageTokens
from shared.domain.messages import plain_text, validate_messages
from shared.domain.turns import split_turns
from shared.tokens import TokenCounter
from tests.assembly.helpers import assistant, tool_result, user

COUNTER = TokenCounter("o200k_base")
VOCABULARY = ["alpha", "beta", "gamma", "delta", "tea", "vim", "日本", "ok", "deploy", "invoice-4821"]
WORDS = st.lists(st.sampled_from(VOCABULARY), max_size=40)
CALL_ID = "abcdefghi"


def pointer_for(position: int, _message: common_pb2.ConversationMessage) -> str:
    return f"ptr-{position}"


def expand_text(position: int) -> str:
    return f'memory_expand("ptr-{position}")'


def normal(text: str) -> str:
    return " ".join(text.split()).lower()


def summaries_of(texts: list[str]) -> list[packet_pb2.CompactSummary]:
    return [packet_pb2.CompactSummary(session_uri="viking://s", overview=t) for t in texts]


def memory(i: int, content: str, kind: str = "memory") -> MemoryForInjection:
    return MemoryForInjection(f"viking://user/u/memories/n/{i}.md", "n", content, 0.5, kind=kind)


def numbered(messages: list[common_pb2.ConversationMessage]) -> list[common_pb2.ConversationMessage]:
    """Each message gets its position as id, so output messages (elided copies included) map back."""
    for index, message in enumerate(messages):
        message.id = f"m{index}"
    return messages


@dataclass
class Scenario:
    messages: list[common_pb2.ConversationMessage]
    memories: list[MemoryForInjection]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """A transcript (some tool outputs large enough to be elided) and recalled items for it, some
    of kind `turn` quoting one of its user/assistant messages as the turn index would."""
    messages: list[common_pb2.ConversationMessage] = []
    if draw(st.booleans()):
        messages.append(assistant("preamble " + " ".join(draw(WORDS))))
    for t in range(draw(st.integers(1, 9))):
        messages.append(user(" ".join(draw(WORDS)) or "hi"))
        for c in range(draw(st.integers(0, 2))):
            call_id = f"t{t}c{c}"
            messages.append(assistant("", [(call_id, "tool")]))
            size = draw(st.sampled_from([0, 0, 150, 600]))
            output = " ".join(draw(WORDS)) + " ".join(VOCABULARY[i % 6] for i in range(size))
            messages.append(tool_result(call_id, output))
        if draw(st.booleans()):
            messages.append(assistant(" ".join(draw(WORDS)) or "done"))
    numbered(messages)
    quotable = [plain_text(m) for m in messages if len(normal(plain_text(m))) >= 12]
    mems: list[MemoryForInjection] = []
    for i in range(draw(st.integers(0, 8))):
        if quotable and draw(st.booleans()):
            quoted = draw(st.sampled_from(quotable))
            mems.append(
                memory(i, f"[2025-01-02 10:00] user: {quoted}\n[2025-01-02 10:01] assistant: ok", "turn")
            )
        else:
            kind = draw(st.sampled_from(["memory", "turn"]))
            mems.append(memory(i, " ".join(draw(WORDS)) or "m", kind))
    return Scenario(messages, mems)


def host_messages(packed: PackedContext) -> list[common_pb2.ConversationMessage]:
    return [m for m in packed.messages if not is_engine_injected(m)]


def recall_tokens(packed: PackedContext, count: MessageTokens) -> int:
    return count.total([m for m in packed.injected if m.role != common_pb2.MESSAGE_ROLE_USER])


def expected_profile(blocks: list[str], room: int) -> list[str]:
    kept: list[str] = []
    for block in blocks:
        if COUNTER.count(profile_text([*kept, block])) <= room:
            kept.append(block)
    return kept


def expected_summaries(texts: list[str], count: MessageTokens, room: int) -> list[str]:
    """Newest first while the summary message (each with its expand reference) fits `room`."""
    kept: list[packet_pb2.CompactSummary] = []
    for summary in reversed(summaries_of(texts)):
        if count(summary_message([expandable(s) for s in [summary, *kept]])) <= room:
            kept.insert(0, summary)
    return [s.overview for s in kept]


def shown_raw(packed: PackedContext) -> list[str]:
    texts = [normal(plain_text(m)) for m in host_messages(packed)]
    return [t for t in texts if len(t) >= 12]


def shown_whole(exchange: str, shown: list[str]) -> bool:
    """Every message line of a recalled exchange (tool lines aside, unless it has only those)
    holds the start of a raw text."""
    lines = [line for line in exchange.split("\n") if line.strip()]
    said = [line for line in lines if not re.match(r"(\w+: )?\[", line)] or lines
    return all(any(text[:200] in normal(line) for text in shown) for line in said)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scenario=scenarios(),
    headroom=st.integers(-300, 6000),
    recent=st.integers(1, 5),
    summary_texts=st.lists(st.text(min_size=1, max_size=200).filter(str.strip), max_size=3),
    profile=st.lists(st.text(min_size=1, max_size=200), max_size=2),
    anchor_last_user=st.booleans(),
    recall_cap=st.sampled_from([0, 0, 60, 300]),
    recall_share=st.sampled_from([0.5, 0.2, 1.0]),
    with_pointer=st.booleans(),
)
def test_packing_follows_the_budget_rule(  # noqa: PLR0915, PLR0917 - one property, many inputs
    scenario: Scenario,
    headroom: int,
    recent: int,
    summary_texts: list[str],
    profile: list[str],
    anchor_last_user: bool,
    recall_cap: int,
    recall_share: float,
    with_pointer: bool,
) -> None:
    messages, mems = scenario.messages, scenario.memories
    count = MessageTokens(COUNTER)
    turns = split_turns(messages)
    newest = turns[-1]
    newest_tokens = count.total(newest.messages)
    budget = max(0, newest_tokens + headroom)  # around what the newest exchange alone takes
    plan = RecallPlan("query", CALL_ID, mems) if mems else None
    users = [i for i, m in enumerate(messages) if m.role == common_pb2.MESSAGE_ROLE_USER]
    anchor = users[-1] if users and anchor_last_user else None
    packed = pack_context(
        budget=budget, turns=turns, recent_raw_turn_count=recent, count=count, profile_blocks=profile,
        summaries=summaries_of(summary_texts), recall=plan, recall_anchor=anchor, recall_cap=recall_cap,
        recall_share=recall_share, pointer=pointer_for if with_pointer else None,
    )  # fmt: skip

    # Budget: over only when the newest exchange alone exceeds it; otherwise honoured.
    assert packed.tokens.over_budget == (newest_tokens > budget)
    event(f"over budget: {packed.tokens.over_budget}")
    if packed.tokens.over_budget:
        assert packed.messages == list(newest.messages) and packed.system_prompt_addition == ""
    else:
        assert packed.tokens.used <= budget
    # The accounting is exact.
    assert packed.tokens.used == packed.estimated_tokens
    assert packed.tokens.used == count.total(packed.messages) + COUNTER.count(packed.system_prompt_addition)
    assert packed.tokens.recall == recall_tokens(packed, count)
    assert packed.tokens.raw_turns == count.total(host_messages(packed))
    # Cut: the items packing looked at and left out; those below the first that did not fit are
    # not looked at. Every item ranked above a kept one was looked at.
    cut, kept = packed.tokens.recalled_memories_cut, packed.recalled_kept
    assert max(kept, default=-1) + 1 - len(kept) <= cut <= len(mems) - len(kept)
    assert packed.tokens.summaries_cut == len(summary_texts) - len(packed.summaries)

    # Raw host messages: one contiguous tail of the transcript, in order, newest exchange unchanged.
    host = host_messages(packed)
    kept_turns = len(packed.recent_turns)
    assert [t.start for t in packed.recent_turns] == [t.start for t in turns[len(turns) - kept_turns :]]
    tail = [m for t in turns[len(turns) - kept_turns :] for m in t.messages]
    assert [m.id for m in host] == [m.id for m in tail]
    assert host[len(host) - len(newest.messages) :] == list(newest.messages)
    # Older tool outputs are either unchanged or elided in the middle with a pointer, and shorter.
    limit = elision_limit(budget)
    for out, original in zip(host, tail, strict=True):
        if out == original:
            continue
        position = int(original.id[1:])
        assert with_pointer and original.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT
        assert position < newest.start and count(original) > limit
        assert expand_text(position) in out.content[0].tool_result.content[0].text.text
        assert count(out) < count(original)
        assert out.content[0].tool_result.tool_call_id == original.content[0].tool_result.tool_call_id
        event("an older tool output elided")

    # Fill order: profile, then summaries (newest first), each taking what fits after the newest
    # exchange and what came before it.
    room = 0 if packed.tokens.over_budget else budget - newest_tokens
    assert packed.profile_blocks == expected_profile(profile, room)
    assert [s.overview for s in packed.summaries] == expected_summaries(
        summary_texts, count, room - packed.tokens.profile
    )
    # Raw turns beyond the recent window only when no summary stands in for them.
    if kept_turns > recent:
        assert not summary_texts
        event("older turns beyond the window kept")
    # Recall: best first, never an exchange the context already shows raw, and the pair within
    # the cap.
    shown = shown_raw(packed)
    eligible = [i for i, m in enumerate(mems) if m.kind != "turn" or not shown_whole(m.content, shown)]
    assert packed.recalled_kept == sorted(packed.recalled_kept)
    assert set(packed.recalled_kept) <= set(eligible)
    if len(eligible) < len(mems):
        event("a recalled turn left out as shown raw")
    if recall_cap:
        assert packed.tokens.recall <= recall_cap
    # A recent-window turn is dropped only when it did not fit: recall beyond its share then only
    # took room smaller than that turn (a few tokens of slack per item: recall costs are estimated
    # per item before the exact pair is counted).
    window_turns = min(max(1, recent), len(turns))
    if kept_turns < window_turns:
        dropped = turns[len(turns) - kept_turns - 1]
        dropped_tokens = count.total(dropped.messages)
        slack = 4 * len(packed.recalled_kept)
        event("a recent-window turn dropped")
        assert packed.tokens.recall <= budget * recall_share + dropped_tokens + slack
    # The recall pair sits right after the anchor (or at the end), and the whole is a valid transcript.
    if packed.recalled_kept:
        call_at = next(
            i
            for i, m in enumerate(packed.messages)
            if is_engine_injected(m) and m.role == common_pb2.MESSAGE_ROLE_ASSISTANT
        )
        before = packed.messages[call_at - 1] if call_at else None
        if anchor is not None:
            assert before is not None and before.id == f"m{anchor}"
        elif anchor is None:
            assert call_at == len(packed.messages) - 2
    validate_messages(packed.messages)
