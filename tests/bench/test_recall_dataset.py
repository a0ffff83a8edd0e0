"""The generated recall benchmark is what docs/benchmarks.md says it is."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from services.assembly.lexical import content_terms
from shared.tokens import TokenCounter
from tests.bench.recall.baselines import Bm25Baseline, newest_first, raw_messages
from tests.bench.recall.dataset import KINDS, generate
from tests.bench.recall.run import evidence_recall


def test_default_size_has_enough_sessions_questions_and_kinds() -> None:
    histories = generate(seed=7, users=3, sessions=20)
    assert all(len(h.sessions) >= 20 for h in histories)
    questions = [q for h in histories for q in h.questions]
    assert len(questions) >= 300
    kinds = Counter(q.kind for q in questions)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 30
    assert all(len(q.evidence) == 2 for q in questions if q.kind == "multi")


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_evidence_is_said_once_and_questions_are_worded_differently(seed: int) -> None:
    for history in generate(seed=seed, users=1, sessions=6):
        said = Counter(e.user for s in history.sessions for e in s.exchanges)
        for question in history.questions:
            for evidence in question.evidence:
                turn = history.sessions[evidence.session].exchanges[evidence.exchange]
                assert turn.user == evidence.text and said[evidence.text] == 1
                # Worded differently: a third of the question's content words are not in the evidence.
                words = set(content_terms(question.text))
                assert len(words - set(content_terms(evidence.text))) >= max(1, len(words) // 3), question
        assert len({q.text for q in history.questions}) == len(history.questions)


def test_baselines_fit_the_budget_and_score_evidence() -> None:
    counter = TokenCounter("o200k_base")
    history = generate(seed=3, users=1, sessions=4)[0]
    messages = raw_messages(
        [t for s in history.sessions for e in s.exchanges for t in (e.user, e.assistant)], counter
    )
    question = history.questions[0]
    for budget in (50, 300, 1000):
        for chosen in (Bm25Baseline(messages).context(question.text, budget), newest_first(messages, budget)):
            assert sum(counter.count_message([t]) for t in chosen) <= budget
    found = "\n".join(Bm25Baseline(messages).context(question.text, 100_000))
    assert evidence_recall(question, found) == 1.0
    assert evidence_recall(question, "unrelated text") == 0.0
