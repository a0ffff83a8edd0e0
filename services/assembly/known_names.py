"""The query against the user's history: a name that history never says alongside what is asked
leaves the query.

A name in the prompt that no exchange of the user holds next to another word of the prompt
cannot single out an exchange that answers it, and it pulls both legs the wrong way: the
lexical one toward the short exchanges that hold only the name (a greeting, "Thanks, Caro!",
which BM25 favours for being short), the embedding toward whatever else names and chats. People
ask about "Caroline" where the conversation said "Caro" in greetings only, or not at all. So
such a name goes; a name said together with what is asked ("What did Priya say about
Lisbon?", and an exchange mentions both) stays, and so does a name that is all the prompt has.

Measured on the hard recall tier, whose questions name a speaker: evidence recall in a new
session at 1k / 2k / 4k / 8k was 80.7 / 85.9 / 92.4 / 97.9 % with the names; with the unknown
names dropped 84.7 / 93.6 / 96.0 / 97.9 %. Asked with the nicknames the conversation uses in its
greetings instead (a name that is known, but never alongside what is asked), keeping it gave
74.3 / 80.1 / 90.5 / 92.4 %. Dropping every unknown *word* instead of only names lost multi-hop
questions ("instruments" where the history said "instrument" once and "ukulele" elsewhere):
common words carry meaning for the embedding even when the history never used them.

Until the replica's exchange index has synced the user (`exchange_index`), nothing is known and
the query is unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.assembly.exchange_index import ExchangeIndex
from services.assembly.lexical import content_terms, tokens
from services.assembly.recall_intent import names_in
from shared.openviking.tenant import Tenant

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class RefinedQuery:
    text: str
    """What the semantic find embeds and the lexical leg's terms come from."""
    dropped: tuple[str, ...] = ()
    """The name words left out (lower case)."""


def name_words(query: str) -> list[str]:
    """The lower-cased word tokens of the query's names, in order, each once."""
    return list(dict.fromkeys(t for name in names_in(query) for t in tokens(name)))


def without_unrelated_names(query: str, index: ExchangeIndex | None, tenant: Tenant) -> RefinedQuery:
    """`query` less the words of the names the user's history never says alongside another
    content word of the query (`without_words`)."""
    names = name_words(query)
    if index is None or not names:
        return RefinedQuery(query)
    others = [t for t in content_terms(query) if t not in names]
    apart = index.apart(tenant, names, others)
    return without_words(query, apart or frozenset())


def without_words(query: str, unknown: frozenset[str]) -> RefinedQuery:
    """`query` less every whitespace-separated word holding one of the `unknown` tokens;
    unchanged when that would leave no word token at all."""
    if not unknown:
        return RefinedQuery(query)
    words = [(w, frozenset(tokens(w))) for w in _WORD.findall(query)]
    kept = [(w, said) for w, said in words if not said & unknown]
    if not any(said for _, said in kept):
        return RefinedQuery(query)
    dropped = frozenset().union(*(said for _, said in words)) & unknown
    return RefinedQuery(" ".join(w for w, _ in kept), tuple(sorted(dropped)))
