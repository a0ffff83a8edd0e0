from __future__ import annotations

from contextengine.v1 import common_pb2, packet_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.assembly.injection import MemoryForInjection, is_engine_injected
from services.assembly.packing import MessageTokens, RecallPlan, TokenCountCache, pack_context, split_turns
from shared.domain.messages import validate_messages
from shared.tokens import TokenCounter
from tests.assembly.helpers import assistant, tool_result, user

COUNTER = TokenCounter("o200k_base")
WORDS = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "tea", "vim", "日本", "ok"]), max_size=40
)


@st.composite
def transcripts(draw: st.DrawFn) -> list[common_pb2.ConversationMessage]:
    messages: list[common_pb2.ConversationMessage] = []
    if draw(st.booleans()):
        messages.append(assistant("preamble " + " ".join(draw(WORDS))))
    for t in range(draw(st.integers(0, 8))):
        messages.append(user(" ".join(draw(WORDS)) or "hi"))
        for c in range(draw(st.integers(0, 2))):
            call_id = f"t{t}c{c}"
            messages.append(assistant("", [(call_id, "tool")]))
            messages.append(tool_result(call_id, " ".join(draw(WORDS))))
        if draw(st.booleans()):
            messages.append(assistant(" ".join(draw(WORDS)) or "done"))
    return messages


@st.composite
def memories(draw: st.DrawFn) -> list[MemoryForInjection]:
    return [
        MemoryForInjection(f"viking://user/u/memories/n/{i}.md", "n", " ".join(draw(WORDS)) or "m", 0.5)
        for i in range(draw(st.integers(0, 6)))
    ]


def summaries_of(texts: list[str]) -> list[packet_pb2.CompactSummary]:
    return [packet_pb2.CompactSummary(session_uri="viking://s", overview=t) for t in texts]


def test_split_turns_keeps_tool_pairs_together() -> None:
    messages = [
        assistant("pre"),
        user("a"),
        assistant("", [("c1", "t")]),
        user("interjection"),
        tool_result("c1", "late result"),
        user("b"),
        assistant("ok"),
    ]
    turns = split_turns(messages)
    assert [(t.start, len(t.messages)) for t in turns] == [(0, 1), (1, 4), (5, 2)]


def test_recall_cut_before_summaries_then_profile() -> None:
    messages = [user("hello there friend"), assistant("hi")]
    count = MessageTokens(COUNTER)
    raw = count.total(messages)
    plan = RecallPlan("q", "abcdefghi", [MemoryForInjection("u", "c", "x " * 50, 0.5)] * 3)
    full = pack_context(
        budget=100_000, turns=split_turns(messages), recent_raw_turn_count=8, count=count,
        profile_blocks=["[User Profile]\nname"], summaries=summaries_of(["s1", "s2"]), recall=plan,
    )  # fmt: skip
    assert full.recalled_kept == 3 and len(full.summaries) == 2 and not full.tokens.over_budget
    assert full.tokens.used == full.estimated_tokens <= 100_000
    tight = pack_context(
        budget=raw + full.tokens.summaries + full.tokens.profile, turns=split_turns(messages),
        recent_raw_turn_count=8, count=count, profile_blocks=["[User Profile]\nname"],
        summaries=summaries_of(["s1", "s2"]), recall=plan,
    )  # fmt: skip
    assert tight.recalled_kept == 0 and tight.tokens.recalled_memories_cut == 3 and len(tight.summaries) == 2
    tiny = pack_context(
        budget=raw, turns=split_turns(messages), recent_raw_turn_count=8, count=count,
        profile_blocks=["[User Profile]\nname"], summaries=summaries_of(["s1", "s2"]), recall=plan,
    )  # fmt: skip
    assert tiny.messages == messages and tiny.system_prompt_addition == "" and tiny.tokens.summaries_cut == 2
    assert not tiny.tokens.over_budget
    over = pack_context(budget=1, turns=split_turns(messages), recent_raw_turn_count=8, count=count)
    assert over.messages == messages and over.tokens.over_budget


def test_recall_pair_goes_after_anchor_or_at_end() -> None:
    messages = [user("q1"), assistant("", [("c1", "t")]), tool_result("c1", "r")]
    plan = RecallPlan("q", "abcdefghi", [MemoryForInjection("u", "c", "x", 0.5)])
    count = MessageTokens(COUNTER)
    packed = pack_context(
        budget=10_000, turns=split_turns(messages), recent_raw_turn_count=8, count=count, recall=plan,
        recall_anchor=0,
    )  # fmt: skip
    assert [is_engine_injected(m) for m in packed.messages] == [False, True, True, False, False]
    validate_messages(packed.messages)
    at_end = pack_context(
        budget=10_000, turns=split_turns(messages), recent_raw_turn_count=8, count=count, recall=plan
    )
    assert [is_engine_injected(m) for m in at_end.messages] == [False, False, False, True, True]


def test_token_counts_are_cached_per_message() -> None:
    count = MessageTokens(COUNTER)
    message = user("some words here")
    first = count(message)
    message.content[0].text.text = "changed to a much longer text than before"
    assert count(message) == first  # same object: counted once per call


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=transcripts(),
    budget=st.integers(0, 3000),
    recent=st.integers(1, 4),
    mems=memories(),
    summary_texts=st.lists(st.text(min_size=1, max_size=200), max_size=3),
    profile=st.lists(st.text(min_size=1, max_size=200), max_size=2),
    anchor_last_user=st.booleans(),
)
def test_packing_properties(  # noqa: PLR0917 - hypothesis passes strategies by name
    messages: list[common_pb2.ConversationMessage],
    budget: int,
    recent: int,
    mems: list[MemoryForInjection],
    summary_texts: list[str],
    profile: list[str],
    anchor_last_user: bool,
) -> None:
    count = MessageTokens(COUNTER)
    turns = split_turns(messages)
    plan = RecallPlan("query", "abcdefghi", mems) if mems else None
    users = [i for i, m in enumerate(messages) if m.role == common_pb2.MESSAGE_ROLE_USER]
    anchor = users[-1] if users and anchor_last_user else None
    summaries = summaries_of(summary_texts)
    packed = pack_context(
        budget=budget, turns=turns, recent_raw_turn_count=recent, count=count, profile_blocks=profile,
        summaries=summaries, recall=plan, recall_anchor=anchor,
    )  # fmt: skip
    recent_messages = [m for t in turns[-recent:] for m in t.messages]
    raw_tokens = count.total(recent_messages)
    host_out = [m for m in packed.messages if not is_engine_injected(m)]
    # The newest raw turns are always there, in order, at the end of the host messages.
    assert host_out[len(host_out) - len(recent_messages) :] == recent_messages
    # Host messages keep their order; older ones only when there are no summaries.
    positions = [next(i for i, m in enumerate(messages) if m is h) for h in host_out]
    assert positions == sorted(positions)
    if summaries:
        assert len(host_out) == len(recent_messages)
    # Budget: never over unless the raw turns alone exceed it.
    assert packed.tokens.over_budget == (raw_tokens > budget)
    if not packed.tokens.over_budget:
        assert packed.tokens.used <= budget
    else:
        assert packed.recalled_kept == 0 and not packed.summaries and not packed.profile_blocks
    assert packed.tokens.used == count.total(packed.messages) + COUNTER.count(packed.system_prompt_addition)
    # Cut order: recall first, then summaries, then profile.
    if packed.tokens.summaries_cut:
        assert packed.recalled_kept == 0
    if len(packed.profile_blocks) < len(profile):
        assert not packed.summaries and packed.recalled_kept == 0
    assert packed.tokens.recalled_memories_cut == len(mems) - packed.recalled_kept
    # The output is a well-formed transcript (tool calls directly answered).
    validate_messages(packed.messages)


def test_token_counts_are_reused_across_calls_by_content() -> None:
    counter = COUNTER
    shared = TokenCountCache(capacity=10)
    first = [user(f"turn {i}: deploy the invoice service") for i in range(3)]
    cold = MessageTokens(counter, shared).total(first)
    assert cold == MessageTokens(counter).total(first)
    assert len(shared) == 3
    # The host resends the transcript as new objects: same content, same counts, no new entries.
    again = [user(f"turn {i}: deploy the invoice service") for i in range(3)]
    assert MessageTokens(counter, shared).total(again) == cold
    assert len(shared) == 3
    # Different content is counted afresh.
    changed = [*again[:2], user("turn 2: deploy the invoice service to every region now")]
    assert MessageTokens(counter, shared).total(changed) > cold
    assert len(shared) == 4
