"""The extractive summary and its key terms, with the real tokenizer (pure logic, no stack)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from services.compaction.engine_summary import engine_summary_of, turn_sentences
from services.compaction.extractive import MAX_SENTENCE_TOKENS, Sentence, split_sentences, summarise
from services.compaction.key_terms import capitalised_mid_sentence, coverage, key_terms
from shared.tokens import TokenCounter
from tests.compaction.long_session import SOCIAL, generated_exchanges, host_messages, persisted

COUNT = TokenCounter.for_model("", "o200k_base")


def _sentences(pairs: list[tuple[str, str]]) -> list[Sentence]:
    out = []
    for index, (user, assistant) in enumerate(pairs):
        out.append(Sentence((index, 0), (index,), f"2026-03-{index % 28 + 1:02d}", "U", user))
        out.append(Sentence((index, 1), (index,), f"2026-03-{index % 28 + 1:02d}", "A", assistant))
    return out


def test_key_terms_are_names_numbers_and_dates() -> None:
    text = (
        "Hi Caroline! Melanie flew to Paris on May 7, 2023 with Caroline. I paid 1,250 euros, "
        "about 45% of it. Last week we met at Blue Bottle Coffee on Friday."
    )
    terms = key_terms(text, capitalised_mid_sentence([text]))
    # "Melanie" opens a sentence and is capitalised nowhere else: not taken for a name.
    assert terms.names == {"caroline", "paris", "blue bottle coffee"}
    assert terms.numbers == {"1,250", "45%"}
    assert terms.dates == {"may 7, 2023", "last week", "friday"}
    kept = coverage(terms, "caroline went to paris (may 7, 2023), paid 1,250")
    assert kept.kept == {"names": 2, "numbers": 1, "dates": 1}
    assert kept.total == {"names": 3, "numbers": 2, "dates": 3}


def test_greetings_and_thanks_are_never_picked() -> None:
    summary = summarise(_sentences(list(SOCIAL) * 3), max_tokens=500, count=COUNT.count)
    assert summary.text == "" and summary.tokens == 0


def test_facts_are_kept_with_their_date_and_small_talk_is_not() -> None:
    pairs = [
        SOCIAL[0],
        ("My sister Priya moved to Lisbon on March 3.", "Lisbon is lovely in spring."),
        SOCIAL[1],
        ("We decided on 3 replicas for Orion, deadline June 12.", "Noted: Orion gets 3 replicas."),
        SOCIAL[2],
    ]
    summary = summarise(_sentences(pairs), max_tokens=120, count=COUNT.count)
    assert "U: My sister Priya moved to Lisbon on March 3." in summary.text
    assert "2026-03-02" in summary.text.splitlines()  # the date it was said, as a header
    assert "Orion" in summary.text and "June 12" in summary.text
    assert not any(greeting in summary.text for pair in SOCIAL for greeting in pair)
    assert summary.coverage.share() == 1.0


def test_a_fact_said_twice_is_shown_once() -> None:
    pairs = [("Marcus lives in Denver now.", "Good to know."), ("Again: Marcus lives in Denver now.", "Ok.")]
    summary = summarise(_sentences(pairs), max_tokens=200, count=COUNT.count)
    assert summary.text.count("Denver") == 1


def test_a_long_sentence_is_cut_into_pieces_the_cap_can_hold() -> None:
    long = ", ".join(f"item {i} for Zed" for i in range(60)) + "."
    pieces = split_sentences(long, COUNT.count)
    assert len(pieces) > 1 and all(COUNT.count(p) <= MAX_SENTENCE_TOKENS for p in pieces)
    assert " ".join(pieces).split() == long.split()


_WORDS = st.sampled_from(
    ["Priya", "Lisbon", "moved", "on", "March", "3", "hello", "the", "450", "we", "decided"]
)
_TEXT = st.lists(_WORDS, min_size=1, max_size=30).map(" ".join)


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=25), cap=st.integers(20, 400))
def test_the_summary_never_exceeds_its_cap_and_only_says_what_was_said(
    pairs: list[tuple[str, str]], cap: int
) -> None:
    sentences = _sentences(pairs)
    summary = summarise(sentences, max_tokens=cap, count=COUNT.count)
    assert summary.tokens == COUNT.count(summary.text) <= cap
    said = {s.text for s in sentences}
    assert all(s.text in said for s in summary.picked)
    lines = [line for line in summary.text.splitlines() if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", line)]
    assert all(line.startswith(("U: ", "A: ")) for line in lines)


def test_a_long_session_keeps_most_of_its_facts_within_the_cap() -> None:
    """100 exchanges, half of them small talk: the default cap (200 tokens) keeps most names."""
    turns = persisted(host_messages(generated_exchanges(100)))
    stored = engine_summary_of(turns, max_tokens=200, count=COUNT)
    assert stored.tokens <= 200 and stored.covers_turns == 200
    assert stored.kept_terms["names"] >= 0.75 * len(stored.source_terms["names"])
    total = sum(len(v) for v in stored.source_terms.values())
    assert sum(stored.kept_terms.values()) / total > 0.3
    # More room, more of the source's facts: everything at 1,600 tokens.
    roomy = engine_summary_of(turns, max_tokens=1600, count=COUNT)
    assert sum(roomy.kept_terms.values()) == total


def test_sentences_follow_exchanges_and_skip_tool_traffic() -> None:
    turns = persisted(host_messages(generated_exchanges(4, social_share=0.0)))
    sentences = turn_sentences(turns, COUNT)
    assert [s.exchange for s in sentences if s.role == "U"] == [(0,), (2,), (4,), (6,)]
    assert all(s.said_on.startswith("2026-01-0") for s in sentences)


def test_names_in_any_script_and_unspaced_sentences() -> None:
    text = "Ayer vi a José y a Zoë en Málaga. 我们在2026年3月5日去了北京。预算是4500元\uff01"
    terms = key_terms(text, capitalised_mid_sentence([text]))
    assert {"josé", "zoë", "málaga"} <= terms.names
    assert {"4500"} <= terms.numbers
    pieces = split_sentences(text + "很长" * 200, COUNT.count)
    assert pieces[0] == "Ayer vi a José y a Zoë en Málaga."
    assert "我们在2026年3月5日去了北京。" in pieces
    assert all(COUNT.count(p) <= MAX_SENTENCE_TOKENS for p in pieces)
