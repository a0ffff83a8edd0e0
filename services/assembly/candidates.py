"""Stage 2 of recall: candidates per source, as one data type (`Candidate`).

- memories: the semantic find's memory files this agent may see (`shared.domain.memory_scope`),
  level 2 only, first occurrence wins;
- turns, semantic: the same find's turn-index documents above the score threshold;
- turns, lexical: the exchange index's BM25 order, or BM25 over what grep matched or over the
  semantic pool's exchanges.

Each source's list is ranked by uri for fusion; a turn becomes a `Candidate` only when its item
is built (`CandidatePool`): fusion ranks ~400 turns and packing reads a few dozen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from contextengine.v1 import packet_pb2

from services.assembly import lexical
from services.assembly.exchange_index import IndexedExchange
from shared.domain.memory_scope import owner_tag, visible_to
from shared.domain.turn_index import is_turn_uri
from shared.openviking.models.search import GrepResult, SearchHit

TURN_CATEGORY = "conversation"


class Candidate(NamedTuple):
    uri: str
    abstract: str
    score: float
    """Clamped to [0, 1]; lexical-only turns carry 0 (they have no semantic score)."""
    level: int
    category: str
    scope: packet_pb2.MemoryScope.ValueType
    tags: tuple[str, ...] = ()
    body: str = ""
    """The document's text when the source returned it (find `read_content`, grep context)."""
    kind: str = "memory"
    """`memory` or `turn`."""


def clamp_score(score: float) -> float:
    return min(1.0, max(0.0, score))


def category_of(uri: str) -> str:
    """`.../memories/preferences/x.md` -> `preferences`; `.../memories/profile.md` -> `profile`."""
    _, marker, rest = uri.partition("/memories/")
    if not marker or not rest:
        return "memory"
    head, slash, _ = rest.partition("/")
    if slash:
        return head or "memory"
    return head.rsplit(".", 1)[0] or "memory"


def agent_tag(agent_id: str) -> str:
    """The tag marking a memory as the agent's own (AGENT scope)."""
    return owner_tag(agent_id)


def to_candidate(hit: SearchHit, agent_id: str) -> Candidate | None:
    """The hit as a candidate for this agent; None when it belongs to another agent."""
    scope = visible_to(hit.tags, agent_id)
    if scope is None:
        return None
    return Candidate(
        uri=hit.uri,
        abstract=hit.abstract,
        score=clamp_score(hit.score),
        level=hit.level,
        category=category_of(hit.uri),
        scope=scope,
        tags=tuple(hit.tags),
        body=hit.content or "",
    )


def merge_candidates(hit_lists: Sequence[Sequence[SearchHit]], agent_id: str) -> list[Candidate]:
    """Merge the passes in order, dedupe by uri (first wins), keep level 2 only."""
    seen: set[str] = set()
    merged: list[Candidate] = []
    for hits in hit_lists:
        for hit in hits:
            if hit.uri in seen or hit.level != 2:
                continue
            candidate = to_candidate(hit, agent_id)
            if candidate is None:
                continue
            seen.add(hit.uri)
            merged.append(candidate)
    return merged


def turn_candidate(uri: str, body: str, score: float) -> Candidate:
    return Candidate(
        uri=uri,
        abstract="",
        score=clamp_score(score),
        level=2,
        category=TURN_CATEGORY,
        scope=packet_pb2.MEMORY_SCOPE_USER,
        body=body,
        kind="turn",
    )


def split_hits(hits: Sequence[SearchHit]) -> tuple[list[SearchHit], list[SearchHit]]:
    """The find's hits as (stored memories, turn-index documents), each in the find's order."""
    stored: list[SearchHit] = []
    turns: list[SearchHit] = []
    for hit in hits:
        (turns if is_turn_uri(hit.uri) else stored).append(hit)
    return stored, turns


def semantic_turns(turn_hits: Sequence[SearchHit], threshold: float) -> list[SearchHit]:
    """The find's turn-index documents (`split_hits`) above `threshold`, best first by their
    score less a penalty for saying little (`lexical.information`). Hits, not candidates: only
    those whose items are built become candidates (`CandidatePool`)."""
    kept = [hit for hit in turn_hits if hit.level == 2 and hit.score >= threshold]
    return sorted(kept, key=_informative_score, reverse=True)


def _informative_score(hit: SearchHit) -> float:
    return clamp_score(hit.score) - lexical.low_information_penalty(hit.abstract)


def lexical_turns(
    terms: Sequence[str],
    pool: Sequence[SearchHit],
    grepped: GrepResult | None,
    indexed: Sequence[IndexedExchange] | None = None,
) -> list[tuple[str, str]]:
    """(uri, text) of the exchanges in the exchange index's BM25 order (when it answered), else
    BM25 of the grep matches (when grep ran), else of the semantic pool's exchanges. The text of
    one the index matched is "" (read when its item is built, if ever: `CandidatePool`)."""
    if indexed is not None:
        return [(hit.uri, "") for hit in indexed if is_turn_uri(hit.uri)]
    if grepped is not None:
        matches = lexical.rank(terms, lexical.documents(grepped), [h.abstract for h in pool])
    else:
        matches = lexical.rank(terms, {h.uri: h.abstract for h in pool}, [])
    return [(hit.uri, hit.content) for hit in matches if is_turn_uri(hit.uri)]


class CandidatePool:
    """Every source's candidates by uri, a turn's built only when its item is (most of the
    semantic pool's 200 never are): a stored memory as ranked by the memory rules, else a turn
    with its semantic score and text, else a turn only the lexical leg found (score 0; its text
    from grep, or read from the exchange index)."""

    def __init__(
        self,
        memories: Sequence[Candidate],
        dense: Sequence[SearchHit],
        matched: Sequence[tuple[str, str]],
        read: Callable[[str], str],
    ) -> None:
        self._memories = {c.uri: c for c in memories}
        self._dense = {hit.uri: hit for hit in dense}
        self._matched = dict(matched)
        self._read = read

    def __getitem__(self, uri: str) -> Candidate:
        memory = self._memories.get(uri)
        if memory is not None:
            return memory
        hit = self._dense.get(uri)
        if hit is not None:
            return turn_candidate(uri, hit.abstract, hit.score)
        return turn_candidate(uri, self._matched.get(uri) or self._read(uri), 0.0)
