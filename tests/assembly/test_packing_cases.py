"""Budgeted packing, worked examples of each step of the fill order (`services.assembly.packing`;
the budget rule as properties over random transcripts is `test_packing`)."""

from __future__ import annotations

from contextengine.v1 import common_pb2, packet_pb2

from services.assembly.elision import elision_limit
from services.assembly.injection import is_engine_injected
from services.assembly.packing import RecallPlan, pack_context
from services.assembly.token_counts import MessageTokens, TokenCountCache
from shared.domain.messages import plain_text, validate_messages
from shared.domain.turns import split_turns
from tests.assembly.helpers import assistant, tool_result, user
from tests.assembly.test_packing import (
    CALL_ID,
    COUNTER,
    expand_text,
    host_messages,
    memory,
    numbered,
    pointer_for,
    summaries_of,
)


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


def exchange(i: int, words: int = 30) -> list[common_pb2.ConversationMessage]:
    return [user(f"question {i} " + "alpha " * words), assistant(f"answer {i} " + "beta " * words)]


def test_newest_exchange_kept_even_over_budget_and_nothing_else() -> None:
    messages = numbered([m for i in range(3) for m in exchange(i)])
    count = MessageTokens(COUNTER)
    plan = RecallPlan("q", CALL_ID, [memory(0, "likes tea")])
    over = pack_context(
        budget=10, turns=split_turns(messages), recent_raw_turn_count=8, count=count,
        profile_blocks=["[User Profile]\nname"], summaries=summaries_of(["s1"]), recall=plan,
    )  # fmt: skip
    assert over.tokens.over_budget and over.messages == messages[-2:]
    assert over.recalled_kept == [] and not over.summaries and over.system_prompt_addition == ""


def test_recent_window_shrinks_from_its_oldest_end() -> None:
    messages = numbered([m for i in range(5) for m in exchange(i)])
    count = MessageTokens(COUNTER)
    per_turn = count.total(messages[:2])
    for fit in range(1, 6):
        packed = pack_context(
            budget=per_turn * fit + per_turn // 2, turns=split_turns(messages), recent_raw_turn_count=8,
            count=count,
        )  # fmt: skip
        assert packed.messages == messages[-2 * fit :] and not packed.tokens.over_budget


def test_recall_takes_its_share_before_the_window_then_what_is_left() -> None:
    messages = numbered([m for i in range(6) for m in exchange(i)])
    count = MessageTokens(COUNTER)
    turns = split_turns(messages)
    per_turn = count.total(messages[:2])
    plan = RecallPlan("q", CALL_ID, [memory(i, f"fact {i} " + "gamma " * 30) for i in range(20)])
    budget = per_turn * 4
    packed = pack_context(
        budget=budget, turns=turns, recent_raw_turn_count=6, count=count, recall=plan, recall_share=0.5
    )
    # Half the budget to recall first; the window (newest first) gets the rest; recall tops up
    # the gap the next window turn did not fit into.
    kept_turns = len(packed.recent_turns)
    assert 1 < kept_turns < 4
    assert budget * 0.5 - per_turn < packed.tokens.recall < budget * 0.5 + per_turn
    assert packed.recalled_kept == list(range(len(packed.recalled_kept)))
    assert packed.tokens.used <= budget
    # With no share to speak of, the window comes first.
    thin = pack_context(
        budget=budget, turns=turns, recent_raw_turn_count=6, count=count, recall=plan, recall_share=0.01
    )
    assert len(thin.recent_turns) == 4 and thin.recalled_kept == [] and thin.tokens.used == budget
    # A cap bounds the pair whatever room is left.
    capped = pack_context(
        budget=100_000, turns=turns, recent_raw_turn_count=6, count=count, recall=plan, recall_cap=200
    )
    assert 0 < capped.tokens.recall <= 200 and len(capped.recalled_kept) < 20
    assert len(capped.recent_turns) == 6


def test_profile_then_summaries_then_recall() -> None:
    messages = [user("hello there friend"), assistant("hi")]
    count = MessageTokens(COUNTER)
    raw = count.total(messages)
    plan = RecallPlan("q", CALL_ID, [memory(i, "x " * 50) for i in range(3)])
    common = {
        "turns": split_turns(messages), "recent_raw_turn_count": 8, "count": count,
        "profile_blocks": ["[User Profile]\nname"], "summaries": summaries_of(["s1", "s2"]), "recall": plan,
    }  # fmt: skip
    full = pack_context(budget=100_000, **common)  # type: ignore[arg-type]
    assert full.recalled_kept == [0, 1, 2] and len(full.summaries) == 2 and not full.tokens.over_budget
    tight = pack_context(budget=raw + full.tokens.summaries + full.tokens.profile, **common)  # type: ignore[arg-type]
    # Nothing fits: the first item is looked at and cut, the two below it are never looked at.
    assert tight.recalled_kept == [] and tight.tokens.recalled_memories_cut == 1 and len(tight.summaries) == 2
    tiny = pack_context(budget=raw, **common)  # type: ignore[arg-type]
    assert tiny.messages == messages and tiny.system_prompt_addition == "" and tiny.tokens.summaries_cut == 2


def test_older_exchanges_fill_in_only_without_summaries() -> None:
    messages = numbered([m for i in range(5) for m in exchange(i, 3)])
    count = MessageTokens(COUNTER)
    bare = pack_context(budget=100_000, turns=split_turns(messages), recent_raw_turn_count=2, count=count)
    assert bare.messages == messages
    summarised = pack_context(
        budget=100_000, turns=split_turns(messages), recent_raw_turn_count=2, count=count,
        summaries=summaries_of(["what came before"]),
    )  # fmt: skip
    assert host_messages(summarised) == messages[-4:]


def test_long_older_tool_output_is_elided_with_a_pointer() -> None:
    output = "line of build log with details\n" * 400
    messages = numbered(
        [
            user("run the build"),
            assistant("", [("c1", "sh")]),
            tool_result("c1", output),
            assistant("built"),
            user("and now the tests, with the same long output"),
            assistant("", [("c2", "sh")]),
            tool_result("c2", output),
        ]
    )
    count = MessageTokens(COUNTER)
    budget = 4000
    assert count(messages[2]) > elision_limit(budget)
    packed = pack_context(
        budget=budget, turns=split_turns(messages), recent_raw_turn_count=8, count=count, pointer=pointer_for
    )
    assert [m.id for m in packed.messages] == [m.id for m in messages]
    older = packed.messages[2].content[0].tool_result.content[0].text.text
    assert expand_text(2) in older and older.startswith("line of build log") and len(older) < len(output)
    assert packed.messages[-1] == messages[-1]  # the newest exchange is never cut
    assert not packed.tokens.over_budget and packed.tokens.used <= budget
    # Without a pointer nothing is elided: the older exchange no longer fits.
    plain = pack_context(budget=budget, turns=split_turns(messages), recent_raw_turn_count=8, count=count)
    assert plain.messages == messages[4:]


def test_recalled_exchange_already_shown_raw_is_left_out() -> None:
    messages = numbered(
        [*exchange(0, 3), user("what was the invoice number for acme again"), assistant("4821")]
    )
    shown = memory(0, "[2025-01-02 10:00] user: What was the invoice number for ACME again?", "turn")
    unseen = memory(1, "[2024-12-01 09:00] user: the acme invoice is 4821", "turn")
    note = memory(2, "what was the invoice number for acme again", "memory")
    plan = RecallPlan("q", CALL_ID, [shown, unseen, note])
    packed = pack_context(
        budget=10_000, turns=split_turns(messages), recent_raw_turn_count=8, count=MessageTokens(COUNTER),
        recall=plan,
    )  # fmt: skip
    assert packed.recalled_kept == [1, 2] and packed.tokens.recalled_memories_cut == 1


def test_recalled_exchange_whose_window_turn_did_not_fit_is_injected() -> None:
    fact = "the acme invoice number is 4821, remember it"
    long_answer = assistant("noted: " + "details " * 800)
    messages = numbered([user(fact), long_answer, user("what was the acme invoice?")])
    recalled = memory(0, f"[2025-01-01 10:00] user: {fact}\n[2025-01-01 10:00] assistant: noted", "turn")
    packed = pack_context(
        budget=400, turns=split_turns(messages), recent_raw_turn_count=8, count=MessageTokens(COUNTER),
        recall=RecallPlan("q", CALL_ID, [recalled]),
    )  # fmt: skip
    assert host_messages(packed) == messages[2:]  # the long exchange does not fit raw ...
    assert packed.recalled_kept == [0]  # ... so its recalled form should stand in for it


def test_recall_pair_goes_after_anchor_or_at_end() -> None:
    messages = [user("q1"), assistant("", [("c1", "t")]), tool_result("c1", "r")]
    plan = RecallPlan("q", CALL_ID, [memory(0, "x")])
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


def test_injected_summary_names_what_expands_it() -> None:
    """The model can drill down from a summary using only what it was shown."""
    messages = [user("and the export job?")]
    summary = packet_pb2.CompactSummary(
        session_uri="viking://user/u/sessions/ce-abc-g1", overview="We chose Postgres for orders."
    )
    packed = pack_context(
        budget=10_000, turns=split_turns(messages), recent_raw_turn_count=8, count=MessageTokens(COUNTER),
        summaries=[summary],
    )  # fmt: skip
    shown = plain_text(packed.injected[0])
    assert "We chose Postgres for orders." in shown
    assert 'memory_expand("viking://user/u/sessions/ce-abc-g1")' in shown
