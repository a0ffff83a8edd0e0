"""The upstream plugin's memory rules (docs/design.md §3.1), applied to the memory candidates: score
threshold, category+abstract dedupe, query-aware ranking (leaf, temporal, preference and keyword
bonuses) and per-item truncation."""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.assembly.candidates import Candidate

LEAF_BONUS = 0.12
TEMPORAL_BONUS = 0.10
PREFERENCE_BONUS = 0.08
MAX_OVERLAP_BONUS = 0.2
QUERY_TOKEN_LIMIT = 8
EVENT_CATEGORIES = frozenset({"events", "cases"})
"""Categories deduplicated by uri only (distinct events may share an abstract)."""

_QUERY_TOKEN = re.compile(r"[a-z0-9]{2,}")
_STOPWORD_TEXT = (
    "the a an and or but if of to in on at for with about from by as is are was were be been being "
    "do does did have has had i me my we our you your he she it its they them their this that these "
    "those what which who whom how when where why can could would should will shall may might must "
    "not no yes so than then there here just also very too any all some please tell know remember"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_TEMPORAL = re.compile(
    r"\b(when|yesterday|today|tomorrow|ago|last|recent|recently|earlier|before|after|date|time|week|month"
    r"|year|since|until)\b|什么时候|昨天|今天|上周|上次|最近|之前|以前|几号|哪天",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(prefer|prefers|preference|preferences|like|likes|love|loves|favorite|favourite|hate|hates|dislike"
    r"|want|wants|usually|style)\b|喜欢|偏好|最爱|讨厌|习惯|想要",
    re.IGNORECASE,
)


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def select_candidates(candidates: Sequence[Candidate], threshold: float, cap: int) -> list[Candidate]:
    """Sort by score, drop below `threshold`, dedupe by category + normalised abstract, cap."""
    ordered = sorted(candidates, key=lambda c: c.score, reverse=True)
    seen: set[tuple[str, str]] = set()
    kept: list[Candidate] = []
    for candidate in ordered:
        if candidate.score < threshold:
            continue
        if candidate.category in EVENT_CATEGORIES:
            key = (candidate.category, "uri:" + candidate.uri)
        else:
            key = (candidate.category, _normalise(candidate.abstract) or "uri:" + candidate.uri)
        if key in seen:
            continue
        seen.add(key)
        kept.append(candidate)
        if len(kept) >= cap:
            break
    return kept


def query_tokens(query: str) -> list[str]:
    """The first 8 distinct `[a-z0-9]{2,}` tokens of the query, stopwords removed."""
    tokens: list[str] = []
    for token in _QUERY_TOKEN.findall(query.lower()):
        if token in _STOPWORDS or token in tokens:
            continue
        tokens.append(token)
        if len(tokens) == QUERY_TOKEN_LIMIT:
            break
    return tokens


def rank_score(candidate: Candidate, query: str, tokens: Sequence[str] | None = None) -> float:
    """score + 0.12 leaf + 0.10 temporal/event + 0.08 preference/preference + keyword overlap."""
    tokens = query_tokens(query) if tokens is None else tokens
    rank = candidate.score
    if candidate.level == 2:
        rank += LEAF_BONUS
    if candidate.category == "events" and _TEMPORAL.search(query):
        rank += TEMPORAL_BONUS
    if candidate.category == "preferences" and _PREFERENCE.search(query):
        rank += PREFERENCE_BONUS
    if tokens:
        haystack = f"{candidate.uri} {candidate.abstract}".lower()
        matched = sum(1 for token in tokens if token in haystack)
        rank += min(MAX_OVERLAP_BONUS, matched / min(len(tokens), 4) * MAX_OVERLAP_BONUS)
    return rank


def rank_candidates(candidates: Sequence[Candidate], query: str) -> list[tuple[Candidate, float]]:
    tokens = query_tokens(query)
    ranked = [(c, rank_score(c, query, tokens)) for c in candidates]
    ranked.sort(key=lambda pair: pair[1], reverse=True)
    return ranked


def truncate_content(text: str, max_chars: int) -> str:
    """`text` stripped and cut to `max_chars` characters, ending in "..." when cut."""
    text = text.strip()
    if len(text) <= max_chars:
        return text
    return text[: max(0, max_chars - 3)].rstrip() + "..."


def memory_line(category: str, content: str) -> str:
    return f"- [{category}] {content}"
