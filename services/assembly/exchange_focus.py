"""Which messages of a recalled exchange the model is shown: the ones that say what was asked.

An exchange is a user message and the replies after it; usually one of them carries what the
query asks for and the other is an acknowledgement or small talk ("Haha, same here."). Measured
on long conversations (the recall issue), the baselines that beat the engine packed single
messages, twice as many per budget. So an exchange whose messages split into some that share
a content word with the query and some that share none is shown as the former only (each line
still role-labelled, the item still dated, its handle still expanding to the whole exchange);
when every message or none matches (a hit of meaning, not of words), it is shown whole. So is
one whose other messages say more (more distinct content words) than the matching ones: there
the match is an echo of the question ("I'll keep that in mind about moving the checkout DB")
and the answer is the message in other words ("now lives on db-chec-23"). Measured: dropping
those cut the easy recall tier to 78 / 80 / 80 % at 1k / 2k / 4k (96 / 100 / 100 % whole);
keeping them costs the hard tier's new session 83.2 -> 78.8 % at 1k, still 14 points over RRF.

Words are compared after a light suffix folding (`lessons` ~ `lesson`, `moved` ~ `move`).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from services.assembly.lexical import content_terms, tokens

_SUFFIXES = ("ing", "ed", "es", "s")
MIN_STEM = 3
REMEMBERED_LINES = 20_000


def fold(word: str) -> str:
    """`word` without one common inflectional suffix (kept when the rest would be too short)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=REMEMBERED_LINES)
def _folded_words(line: str) -> frozenset[str]:
    """A message line's folded words (recalled exchanges recur call after call)."""
    return frozenset(fold(t) for t in tokens(line))


def folded_terms(terms: Iterable[str]) -> frozenset[str]:
    return frozenset(fold(t) for t in terms)


def focused(exchange: str, terms: frozenset[str]) -> str:
    """The lines of `exchange` (one per message) that share a folded word with `terms`, or the
    whole exchange when all or none of them do."""
    if not terms:
        return exchange
    lines = exchange.split("\n")
    if len(lines) < 2:
        return exchange
    matching = [line for line in lines if terms & _folded_words(line)]
    if not matching or len(matching) == len(lines):
        return exchange
    rest = [line for line in lines if line not in matching]
    if _said(rest) > _said(matching):
        return exchange  # the match is an echo of the question; the others say the answer
    return "\n".join(matching)


def _said(lines: Iterable[str]) -> int:
    """How many distinct content words (three letters or more, not stop words) `lines` say."""
    return len(frozenset().union(*(_content_words(line) for line in lines)))


@lru_cache(maxsize=REMEMBERED_LINES)
def _content_words(line: str) -> frozenset[str]:
    _, _, text = line.partition(": ")
    return frozenset(t for t in content_terms(text or line) if len(t) > 2)
