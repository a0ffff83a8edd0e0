"""Which messages of a recalled exchange are shown (properties over any exchange and query)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.assembly.exchange_focus import focused, fold, folded_terms
from services.assembly.lexical import content_terms

LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=60)


@given(st.lists(LINE, min_size=1, max_size=4), st.lists(st.text(max_size=12), max_size=5))
def test_shows_a_subset_of_the_lines_in_order_never_nothing(lines: list[str], terms: list[str]) -> None:
    exchange = "\n".join(lines)
    shown = focused(exchange, folded_terms(terms))
    kept = shown.split("\n")
    assert shown == exchange or (shown and 0 < len(kept) < len(lines))
    iterator = iter(lines)
    assert all(any(line == candidate for candidate in iterator) for line in kept)  # a subsequence


def test_the_message_that_says_what_was_asked_is_shown_alone() -> None:
    trip = "assistant: We just got back from our trip to Patagonia, ten days of glaciers and hiking!"
    exchange = f"user: Haha, same here.\n{trip}"
    assert focused(exchange, folded_terms(["recent", "trips"])) == trip
    assert focused(exchange, folded_terms(["weather"])) == exchange  # no word in common: whole
    assert fold("lessons") == fold("lesson") and fold("moved") == "mov" and fold("is") == "is"


def test_an_echo_of_the_question_does_not_hide_the_message_that_answers() -> None:
    terms = folded_terms(content_terms("Which machine hosts the checkout staging DB?"))
    fact = "user: The staging database for checkout now lives on db-chec-23.staging.internal, Tariq moved it."
    echo = "assistant: Thanks, noted about the checkout machine."
    assert focused(f"{fact}\n{echo}", terms) == f"{fact}\n{echo}"
    chatter = "assistant: Ha! Maple is a character."
    answer = "user: The checkout staging machine is db-chec-23 since Tariq migrated it last week."
    assert focused(f"{answer}\n{chatter}", terms) == answer
