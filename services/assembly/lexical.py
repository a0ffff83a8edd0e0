"""The lexical leg of recall: exact names, numbers and rare words over the turn index.

OpenViking's `search/grep` finds every indexed exchange containing one of the query's content
words (one regex, case-insensitive, whole words; the match's context lines give the whole
document, so no read follows). The matches are then ranked with BM25 (`rank_bm25`) over the
matched documents plus the semantic leg's documents as background, so a word that appears in
every match weighs little and a rare id weighs a lot.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rank_bm25 import BM25Okapi

from shared.openviking.models.search import GrepResult

MAX_TERMS = 12
"""Content words of the query sent to grep (the first ones; a prompt is short)."""
CONTEXT_LINES = 24
"""Lines around a match returned by grep: an exchange document is shorter than this."""
MATCH_LIMIT = 600
"""grep node_limit: matches beyond this are not ranked (a word that common ranks low anyway)."""

_TOKEN = re.compile(r"[a-z0-9][a-z0-9_.@/-]*[a-z0-9]|[a-z0-9]")
_STOPWORDS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "a an the and or but if of to in on at for with about from by as is are was were be been being "
        "do does did done have has had i me my mine we us our you your yours he him his she her it its "
        "they them their this that these those what which who whom whose how when where why can could "
        "would should will shall may might must not no yes so than then there here just also very too "
        "any all some please tell know remember again ever now still did into over after before again "
        "up down out one get got go going went like make made time thing things say said told ask asked "
    ).split()
)


@dataclass(frozen=True)
class LexicalHit:
    uri: str
    content: str
    """The whole indexed document, rebuilt from the match and its context lines."""
    score: float


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (ids like `inc-48213` and hosts stay whole)."""
    return _TOKEN.findall(text.lower())


def content_terms(query: str) -> list[str]:
    """The query's distinct content words, in order, at most `MAX_TERMS`."""
    terms: list[str] = []
    for token in tokens(query):
        if token in _STOPWORDS or len(token) < 2 or token in terms:
            continue
        terms.append(token)
        if len(terms) == MAX_TERMS:
            break
    return terms


def grep_pattern(terms: Sequence[str]) -> str:
    """One case-insensitive regex matching any of `terms` as a whole word (OpenViking's grep is
    Rust's `regex`: no look-around, so word boundaries)."""
    alternatives = "|".join(re.escape(term) for term in sorted(terms, key=len, reverse=True))
    return rf"\b(?:{alternatives})\b"


def documents(result: GrepResult) -> dict[str, str]:
    """Matched documents by URI, each rebuilt from its matched and context lines."""
    lines: dict[str, dict[int, str]] = {}
    for match in result.matches:
        doc = lines.setdefault(match.uri, {})
        doc[match.line] = match.content
        for extra in (*match.before_context, *match.after_context):
            doc[extra.line] = extra.content
    return {uri: "\n".join(doc[n] for n in sorted(doc)) for uri, doc in lines.items()}


def rank(query_terms: Sequence[str], matched: dict[str, str], background: Sequence[str]) -> list[LexicalHit]:
    """BM25 order of the matched documents (best first); `background` only shapes the statistics."""
    if not matched or not query_terms:
        return []
    uris = list(matched)
    corpus = [tokens(matched[uri]) for uri in uris] + [tokens(text) for text in background]
    scores = BM25Okapi(corpus).get_scores(list(query_terms))
    ranked = sorted(
        (LexicalHit(uri, matched[uri], float(scores[i])) for i, uri in enumerate(uris)),
        key=lambda hit: hit.score,
        reverse=True,
    )
    return [hit for hit in ranked if hit.score > 0]
