"""The lexical leg of recall: exact names, numbers and rare words over the turn index.

OpenViking's `search/grep` finds every indexed exchange containing one of the query's content
words (one regex, case-insensitive, whole words; the match's context lines give the whole
document, so no read follows). The matches are then ranked with BM25 (`rank_bm25`) over the
matched documents plus the semantic leg's documents as background, so a word that appears in
every match weighs little and a rare id weighs a lot. Scores are rank_bm25's BM25Okapi, computed
here over term frequencies cached per document (the same exchanges recur call after call).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import NamedTuple

from shared.openviking.models.search import GrepResult
from shared.sized_cache import SizedCache

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


class LexicalHit(NamedTuple):
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


LOW_INFORMATION_PENALTY = 0.25
INFORMATIVE_WORDS = 16
"""An exchange with fewer distinct content words than this has its semantic score lowered, by
up to LOW_INFORMATION_PENALTY (none at all). MiniLM scores short small talk ("Great chatting
with you!") 0.70-0.74 for almost any question; measured on the hard recall tier (new session,
1k/2k/4k/8k): 72.2/81.3/84.1/93.3 without the penalty, 74.9/83.2/92.4/96.9 with it (0.05 and
0.15 gained less; a larger word count or penalty lost at 1k)."""
_ROLE_WORDS = frozenset(("user", "assistant", "tool", "system"))
REMEMBERED_PENALTIES = 16_384


@lru_cache(maxsize=REMEMBERED_PENALTIES)
def low_information_penalty(text: str) -> float:
    """How much a semantic score is lowered for `text` saying little (0 for an informative one).
    Remembered by content: the same exchanges come back call after call (400 per find)."""
    counted = term_frequencies(text).counts.keys()
    words = {t for t in counted if len(t) > 2 and not t[0].isdigit()} - _STOPWORDS - _ROLE_WORDS
    return LOW_INFORMATION_PENALTY * max(0, INFORMATIVE_WORDS - len(words)) / INFORMATIVE_WORDS


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


BM25_K1 = 1.5
BM25_B = 0.75
BM25_EPSILON = 0.25
"""BM25Okapi's constants (rank_bm25's defaults): term saturation, length normalisation, and the
floor of a negative idf as a share of the average idf."""
CACHED_DOCUMENTS = 20_000
"""Documents whose term frequencies a replica remembers: the same exchanges come back from the
semantic leg call after call."""


class DocumentTerms(NamedTuple):
    counts: Counter[str]
    """How often each token occurs in the document."""
    length: int
    """How many tokens it has."""


_frequencies: SizedCache[tuple[int, int], DocumentTerms] = SizedCache(CACHED_DOCUMENTS)


def term_frequencies(text: str) -> DocumentTerms:
    """`text`'s tokens counted, cached by content (SipHash of the text, keyed per process, and
    its length). Callers must not modify the result."""
    key = (hash(text), len(text))
    terms = _frequencies.get(key)
    if terms is None:
        counts = Counter(tokens(text))
        terms = DocumentTerms(counts, counts.total())
        _frequencies.put(key, terms)
    return terms


def bm25_scores(query_terms: Sequence[str], corpus: Sequence[DocumentTerms]) -> list[float]:
    """BM25Okapi scores of each document of `corpus` (term frequencies) for `query_terms`, as
    rank_bm25 computes them: idf = ln(N - df + 0.5) - ln(df + 0.5), a negative idf floored to
    epsilon x the average idf over the corpus vocabulary."""
    size = len(corpus)
    frequencies_of: dict[str, list[tuple[int, int]]] = {term: [] for term in query_terms}
    wanted = frequencies_of.keys()
    for i, document in enumerate(corpus):  # one set intersection per document (in C)
        for term in document.counts.keys() & wanted:
            frequencies_of[term].append((i, document.counts[term]))
    idfs = {
        term: math.log(size - len(postings) + 0.5) - math.log(len(postings) + 0.5)
        for term, postings in frequencies_of.items()
        if postings
    }
    if any(idf < 0 for idf in idfs.values()):  # a term in most documents: floored (whole vocabulary)
        floor = _idf_floor(corpus)
        idfs = {term: floor if idf < 0 else idf for term, idf in idfs.items()}
    lengths = [document.length for document in corpus]
    average_length = sum(lengths) / size if size else 0.0
    scores = [0.0] * size
    for term in query_terms:
        idf = idfs.get(term)
        if idf is None:
            continue
        for i, tf in frequencies_of[term]:  # documents without the term add 0
            norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths[i] / average_length)
            scores[i] += idf * (tf * (BM25_K1 + 1) / (tf + norm))
    return scores


def _idf_floor(corpus: Sequence[DocumentTerms]) -> float:
    """epsilon x the average idf over the corpus vocabulary."""
    size = len(corpus)
    document_frequency = Counter(chain.from_iterable(document.counts for document in corpus))
    idf_sum = sum(
        words * (math.log(size - df + 0.5) - math.log(df + 0.5))
        for df, words in Counter(document_frequency.values()).items()
    )
    return BM25_EPSILON * idf_sum / len(document_frequency)


def rank(query_terms: Sequence[str], matched: dict[str, str], background: Sequence[str]) -> list[LexicalHit]:
    """BM25 order of the matched documents (best first); `background` only shapes the statistics."""
    if not matched or not query_terms:
        return []
    uris = list(matched)
    corpus = [term_frequencies(matched[uri]) for uri in uris] + [term_frequencies(t) for t in background]
    scores = bm25_scores(query_terms, corpus)
    ranked = sorted(
        (LexicalHit(uri, matched[uri], scores[i]) for i, uri in enumerate(uris)),
        key=lambda hit: hit.score,
        reverse=True,
    )
    return [hit for hit in ranked if hit.score > 0]
