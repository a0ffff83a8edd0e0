"""The lexical leg's BM25 is rank_bm25's BM25Okapi, computed over cached term frequencies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from services.assembly import lexical

WORDS = ["deploy", "friday", "inc-48213", "postgres", "vacuum", "miso", "cat", "tea", "the", "oat"]
documents = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(" ".join), min_size=1, max_size=25
)


@settings(max_examples=200, deadline=None)
@given(corpus=documents, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5, unique=True))
def test_scores_equal_rank_bm25(corpus: list[str], query: list[str]) -> None:
    expected = BM25Okapi([lexical.tokens(text) for text in corpus]).get_scores(query)
    got = lexical.bm25_scores(query, [lexical.term_frequencies(text) for text in corpus])
    assert got == pytest.approx(list(expected), rel=1e-9, abs=1e-12)


def test_a_cached_document_is_counted_once_and_reused() -> None:
    text = "inc-48213 was caused by a vacuum on postgres; vacuum again on friday"
    first = lexical.term_frequencies(text)
    assert first.counts["vacuum"] == 2 and first.length == 12
    assert lexical.term_frequencies("".join(list(text))) is first  # equal content, another object


def test_small_talk_is_penalised_and_an_informative_exchange_is_not() -> None:
    small_talk = (
        "[2026-03-04 14:05] user: Great chatting with you!\n[2026-03-04 14:05] assistant: Thanks, talk soon"
    )
    fact = (
        "[2026-03-04 14:05] user: The doctor ran some tests and confirmed the allergy to sesame, so I carry "
        "an injector now and Dana knows where it is kept in the kitchen drawer beside the spices and vitamins"
    )
    assert lexical.low_information_penalty(fact) == 0
    assert 0 < lexical.low_information_penalty(small_talk) <= lexical.LOW_INFORMATION_PENALTY
    assert lexical.low_information_penalty("") == lexical.LOW_INFORMATION_PENALTY
