"""What the engine is compared with, over the same raw turns and budgets.

- `bm25`: BM25 (rank-bm25) over every raw message of the user's history, the question as the
  query, the best messages that fit the budget;
- `truncation`: the newest messages that fit (a sliding window).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rank_bm25 import BM25Okapi

from services.assembly.lexical import tokens
from shared.tokens import TokenCounter


@dataclass(frozen=True)
class RawMessage:
    text: str
    tokens: int


def raw_messages(texts: Sequence[str], counter: TokenCounter) -> list[RawMessage]:
    return [RawMessage(t, counter.count_message([t])) for t in texts]


def fit(messages: Sequence[RawMessage], budget: int) -> list[str]:
    """Messages in the given order while they fit (skipping any that does not)."""
    kept: list[str] = []
    used = 0
    for message in messages:
        if used + message.tokens <= budget:
            kept.append(message.text)
            used += message.tokens
    return kept


class Bm25Baseline:
    def __init__(self, history: Sequence[RawMessage]) -> None:
        self._history = list(history)
        self._index = BM25Okapi([tokens(m.text) or ["_"] for m in self._history])

    def context(self, question: str, budget: int) -> list[str]:
        scores = self._index.get_scores(tokens(question))
        order = sorted(range(len(self._history)), key=lambda i: scores[i], reverse=True)
        return fit([self._history[i] for i in order], budget)


def newest_first(history: Sequence[RawMessage], budget: int) -> list[str]:
    return fit(list(reversed(history)), budget)
