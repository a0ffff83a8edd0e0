"""Scoring shared by the recall tiers: evidence recall of a context, and the per-budget rows.

Evidence recall: the share of a question's gold turns whose text (normalised, first 100
characters) is in what the model would see, averaged over questions.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from tests.bench.recall.dataset import Question
from tests.bench.recall.replay import Answer

BUDGETS = (1000, 2000, 4000, 8000)
MODES = ("new", "continuing")
EVIDENCE_PREFIX_CHARS = 100


def normal(text: str) -> str:
    return " ".join(text.split()).lower()


def evidence_recall(question: Question, context: str) -> float:
    shown = normal(context)
    hits = sum(1 for e in question.evidence if normal(e.text)[:EVIDENCE_PREFIX_CHARS] in shown)
    return hits / len(question.evidence)


def mean_recall(answers: Sequence[Answer]) -> float:
    if not answers:
        return float("nan")
    return 100 * statistics.fmean(evidence_recall(a.question, a.text) for a in answers)


def engine_rows(
    answers: Sequence[Answer], kinds: Sequence[str]
) -> dict[str, dict[str, dict[int, dict[str, float]]]]:
    """variant -> mode -> budget -> evidence recall (all and per kind), tokens, max over budget."""
    grouped: dict[tuple[str, str, int], list[Answer]] = defaultdict(list)
    for answer in answers:
        grouped[(answer.variant, answer.mode, answer.budget)].append(answer)
    rows: dict[str, dict[str, dict[int, dict[str, float]]]] = defaultdict(lambda: defaultdict(dict))
    for (variant, mode, budget), group in grouped.items():
        rows[variant][mode][budget] = {
            "recall": mean_recall(group),
            "tokens": statistics.median(a.tokens for a in group),
            "max_over": max(a.tokens - budget for a in group),
            **{f"recall_{k}": mean_recall([a for a in group if a.question.kind == k]) for k in kinds},
        }
    return rows


def p50_ms(values: Sequence[float]) -> float:
    return round(1000 * statistics.median(values), 1) if values else float("nan")
