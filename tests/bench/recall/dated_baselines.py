"""The hard tier's baselines: plain indexes over the raw dated turns, as a simple RAG would build.

Every turn is one line, `[YYYY-MM-DD HH:MM] speaker: text`, and costs what the engine's own
counter says it costs as a message (`TokenCounter.count_message`, o200k_base). Each ranker
orders all of a conversation's turns for the question; `pack` keeps the best that fit the
budget (minus the question), in rank order, skipping any that does not fit:

- `bm25`: rank-bm25's Okapi BM25 over the lines (the engine's word tokenizer);
- `dense`: cosine similarity of MiniLM embeddings from the stack's embedding server, the model
  the engine's OpenViking embeds with;
- `rrf`: reciprocal-rank fusion of the two (k = 60);
- `truncation`: the newest turns (a sliding window), the floor every other builder must beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
import numpy as np
from rank_bm25 import BM25Okapi

from services.assembly.lexical import tokens
from shared.domain.turn_index import format_when
from shared.localstack.pins import EMBEDDING_MODEL_NAME
from shared.tokens import TokenCounter
from tests.bench.recall.hard_dataset import Conversation

RRF_K = 60
EMBED_BATCH = 64
BASELINES = ("bm25", "dense", "rrf", "truncation")


@dataclass(frozen=True)
class DatedTurn:
    line: str
    tokens: int


def dated_turns(conversation: Conversation, counter: TokenCounter) -> list[DatedTurn]:
    """Every message of the conversation as a dated line, oldest first."""
    turns = []
    for script in conversation.sessions:
        for i, exchange in enumerate(script.exchanges):
            when = format_when(script.timestamp(i))
            for speaker, text in zip(conversation.speakers, (exchange.user, exchange.assistant), strict=True):
                line = f"[{when}] {speaker}: {text}"
                turns.append(DatedTurn(line, counter.count_message([line])))
    return turns


def pack(turns: Sequence[DatedTurn], order: Sequence[int], room: int) -> str:
    """The turns of `order` that fit in `room` tokens, in that order."""
    kept: list[str] = []
    used = 0
    for i in order:
        if used + turns[i].tokens <= room:
            kept.append(turns[i].line)
            used += turns[i].tokens
    return "\n".join(kept)


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion: each item scores the sum of 1 / (k + rank) over the rankings."""
    score: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda item: -score[item])


async def embed(http: httpx.AsyncClient, texts: Sequence[str]) -> np.ndarray:
    """Unit-length embeddings of `texts` from an OpenAI-compatible `/embeddings` endpoint."""
    rows: list[list[float]] = []
    for start in range(0, len(texts), EMBED_BATCH):
        response = await http.post(
            "/embeddings",
            json={"model": EMBEDDING_MODEL_NAME, "input": list(texts[start : start + EMBED_BATCH])},
        )
        response.raise_for_status()
        rows.extend(item["embedding"] for item in sorted(response.json()["data"], key=lambda d: d["index"]))
    vectors = np.asarray(rows, dtype=np.float32)
    unit: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit


class TurnRankers:
    """BM25, dense and fused rankings over one conversation's dated turns."""

    def __init__(self, turns: Sequence[DatedTurn], vectors: np.ndarray) -> None:
        self.turns = list(turns)
        self._bm25 = BM25Okapi([tokens(t.line) or ["_"] for t in self.turns])
        self._vectors = vectors

    def rankings(self, question: str, question_vector: np.ndarray) -> dict[str, list[int]]:
        bm25_scores = self._bm25.get_scores(tokens(question))
        bm25 = sorted(range(len(self.turns)), key=lambda i: -bm25_scores[i])
        dense_scores = self._vectors @ question_vector
        dense = [int(i) for i in np.argsort(-dense_scores, kind="stable")]
        return {
            "bm25": bm25,
            "dense": dense,
            "rrf": rrf([bm25, dense]),
            "truncation": list(reversed(range(len(self.turns)))),
        }
