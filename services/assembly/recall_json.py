"""The recall tool result's JSON, built from pieces that tokenize on their own.

The JSON the model reads, `{"memories": [{"kind": ..., "score": 0.8244}, ...], "source": ...}`,
is the longest text of an Assemble (up to half the budget) and is counted on every call. It is
cut where the pre-tokenizer of every shipped encoding (`shared.tokens.SHIPPED_ENCODINGS`) splits
anyway: right after an item's `"score":` and after the `},` that ends an item. BPE never merges
across a pre-tokenizer split, so the JSON's token count is the sum of its pieces' counts. An
item's head (all of it but its score) does not depend on the query, so its text and its count
are remembered; only the scores are new on each call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from shared.tokens import TokenCounter

SCORE_KEY = '"score":'
OPENING = '{"memories": ['
REMEMBERED_HEADS = 8_192
"""Items whose JSON head a process remembers (recalled memories and exchanges recur)."""


class RecalledForModel(Protocol):
    """What the model is shown of one recalled item (`MemoryForInjection`)."""

    @property
    def kind(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def said_at(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def score(self) -> float: ...


@lru_cache(maxsize=REMEMBERED_HEADS)
def _head(kind: str, uri: str, category: str, said_at: str, content: str) -> str:
    """`{"kind": ..., "content": ..., "score":` of one item."""
    item = json.dumps(
        {
            "kind": kind,
            "uri": uri,
            "category": category,
            **({"said_at": said_at} if said_at else {}),
            "content": content,
            "score": 0,
        },
        ensure_ascii=False,
    )
    return item[: item.rindex(SCORE_KEY) + len(SCORE_KEY)]


def head_of(memory: RecalledForModel) -> str:
    return _head(memory.kind, memory.uri, memory.category, memory.said_at, memory.content)


def score_piece(memory: RecalledForModel, closing: str) -> str:
    """` 0.8244},` (or the closing of the whole JSON after the last item). A finite float's JSON
    is its repr (what `json.dumps` writes), without the encoder's machinery."""
    return f" {round(float(memory.score), 4)!r}}}{closing}"


def recall_json_pieces(memories: Sequence[RecalledForModel], source: str) -> list[str]:
    """The pieces whose concatenation is the tool result's JSON."""
    end = f'], "source": {json.dumps(source, ensure_ascii=False)}}}'
    if not memories:
        return [f"{OPENING}{end}"]
    pieces: list[str] = []
    last = len(memories) - 1
    for i, memory in enumerate(memories):
        pieces.append((OPENING if i == 0 else " ") + head_of(memory))
        pieces.append(score_piece(memory, end if i == last else ","))
    return pieces


def pieces_tokens(counter: TokenCounter, pieces: Sequence[str]) -> int:
    """The JSON's tokens: the sum of its pieces' (each piece's count is remembered by text)."""
    return sum(counter.count(piece) for piece in pieces)
