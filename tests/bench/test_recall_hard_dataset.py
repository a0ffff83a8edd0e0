"""The hard tier's generator: sizes, gold evidence, and that its questions are hard in the
intended ways (paraphrased, date-dependent, spread over sessions)."""

from __future__ import annotations

import statistics
from collections import Counter
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from services.assembly.lexical import content_terms, tokens
from tests.bench.recall import hard_catalog as catalog
from tests.bench.recall.hard_dataset import KINDS, Conversation, asked_by_nickname, generate_hard
from tests.bench.recall.scoring import EVIDENCE_PREFIX_CHARS, normal

RARE_IN_MESSAGES = 3
"""A word is rare when at most this many of the conversation's messages use it."""
seeds = st.integers(min_value=0, max_value=10_000)


@cache
def conversation(seed: int, sessions: int = 26) -> Conversation:
    (generated,) = generate_hard(seed=seed, users=1, sessions=sessions)
    return generated


def messages(c: Conversation) -> list[tuple[str, str]]:
    """(role, text) of every message, in replay order."""
    return [
        (role, text)
        for s in c.sessions
        for e in s.exchanges
        for role, text in (("u", e.user), ("a", e.assistant))
    ]


def test_default_size_is_locomo_like() -> None:
    for c in generate_hard(seed=7, users=3):
        assert len(c.sessions) >= 25
        assert len(messages(c)) >= 600
        assert len(c.questions) >= 100
        assert set(Counter(q.kind for q in c.questions)) == set(KINDS)
        words = [len(text.split()) for _, text in messages(c)]
        assert 10 <= statistics.median(words) <= 60
        assert max(len(e.text.split()) for q in c.questions for e in q.evidence) >= 25
        gaps = [(b.started - a.started).days for a, b in zip(c.sessions, c.sessions[1:], strict=False)]
        assert min(gaps) >= 3


def test_same_seed_same_conversation() -> None:
    assert generate_hard(seed=3, users=1, sessions=4) == generate_hard(seed=3, users=1, sessions=4)


@settings(max_examples=8, deadline=None)
@given(seeds)
def test_every_evidence_is_one_message_of_the_history(seed: int) -> None:
    c = conversation(seed)
    prefixes = Counter(normal(text)[:EVIDENCE_PREFIX_CHARS] for _, text in messages(c))
    roles = {normal(text)[:EVIDENCE_PREFIX_CHARS]: role for role, text in messages(c)}
    said_by = set()
    for question in c.questions:
        for evidence in question.evidence:
            prefix = normal(evidence.text)[:EVIDENCE_PREFIX_CHARS]
            assert prefixes[prefix] == 1, evidence.text  # present, and counted once
            exchange = c.sessions[evidence.session].exchanges[evidence.exchange]
            assert evidence.text in (exchange.user, exchange.assistant)
            said_by.add(roles[prefix])
    assert said_by == {"u", "a"}  # facts come from both speakers


@settings(max_examples=8, deadline=None)
@given(seeds)
def test_questions_do_not_quote_the_evidence_rare_words(seed: int) -> None:
    c = conversation(seed)
    used_by = Counter(w for _, text in messages(c) for w in set(tokens(text)))
    for question in c.questions:
        evidence_words = {w for e in question.evidence for w in tokens(e.text)}
        quoted = {
            w for w in content_terms(question.text) if w in evidence_words and used_by[w] <= RARE_IN_MESSAGES
        }
        assert not quoted, (question.text, quoted)


@settings(max_examples=8, deadline=None)
@given(seeds)
def test_temporal_answers_are_only_in_the_session_date(seed: int) -> None:
    c = conversation(seed)
    temporal = [q for q in c.questions if q.kind == "temporal"]
    assert temporal
    said = " ".join(text for _, text in messages(c))
    for question in temporal:
        (evidence,) = question.evidence
        started = c.sessions[evidence.session].started
        assert question.answer == started.date().isoformat()
        assert question.answer not in said
        assert f"{started:%B} {started.day}" not in said  # nor as "March 7"


@settings(max_examples=8, deadline=None)
@given(seeds)
def test_multi_hop_needs_turns_from_different_sessions(seed: int) -> None:
    c = conversation(seed)
    multi = [q for q in c.questions if q.kind == "multi-hop"]
    assert multi
    for question in multi:
        assert 2 <= len(question.evidence) <= 3
        assert len({e.session for e in question.evidence}) == len(question.evidence)


def test_names_recur_and_small_talk_surrounds_the_facts() -> None:
    c = conversation(7)
    naming: Counter[str] = Counter()
    for script in c.sessions:
        said = " ".join(f"{e.user} {e.assistant}" for e in script.exchanges)
        naming.update({name for name in (*catalog.FRIENDS, *catalog.PETS) if name in said})
    assert sum(1 for n in naming.values() if n >= len(c.sessions) // 2) >= 3
    gold = {e.text for q in c.questions for e in q.evidence}
    assert len(gold) < 0.15 * len(messages(c))


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10_000))
def test_asked_by_nickname_names_speakers_as_the_conversation_does(seed: int) -> None:
    (original,) = generate_hard(seed=seed, users=1, sessions=4)
    (nicknamed,) = asked_by_nickname([original])
    nicknames = dict(catalog.SPEAKERS)
    said = " ".join(text for _, text in messages(original))
    assert nicknamed.sessions == original.sessions
    assert [(q.kind, q.evidence) for q in nicknamed.questions] == [
        (q.kind, q.evidence) for q in original.questions
    ]
    for before, after in zip(original.questions, nicknamed.questions, strict=True):
        for name in original.speakers:
            assert name not in after.text
            if name in before.text:
                assert nicknames[name] in after.text and nicknames[name] in said
