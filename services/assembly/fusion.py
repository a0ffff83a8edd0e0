"""One ranking from several: reciprocal-rank fusion (Cormack et al., 2009).

Each source ranks its own candidates (memories by the upstream rules, turns by embedding
similarity, turns by BM25); a candidate's fused score is the sum over the lists that hold it of
1 / (k + rank). Scores of different sources are never compared directly, and an item found by
two sources rises above one found by one.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

RRF_K = 60
"""The usual constant: dampens the head of each list so one source cannot dominate."""

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], k: int = RRF_K) -> list[tuple[K, float]]:
    """Keys of all `rankings` (each best first) by fused score, best first; ties keep first-seen order."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for position, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + position)
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)
