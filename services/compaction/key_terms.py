"""The facts a summary must keep: names, numbers and dates said in a conversation.

LLM-free and deterministic, so the extractive summary (`services.compaction.extractive`) can pick
sentences for them and its coverage can be checked against its source turns by the same rule:

- a *name* is a capitalised word of any script (or run of them) that is not the first word of a
  sentence, or a sentence-initial capitalised word the same text also capitalises elsewhere
  ("Melanie" opening a sentence counts once "… with Melanie" is seen); pronouns and calendar
  words are never names (unicameral scripts such as Chinese have none: only numbers and dates);
- a *number* is a run of digits (with `.`, `,` or `:` inside, an optional `%`);
- a *date* is a month name with its day or year, an ISO date, a weekday, or a relative day
  ("yesterday", "last week").

Terms are compared lower-cased, so "Paris" and "paris" are one term.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_DATE = re.compile(
    rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?:,?\s+\d{{4}})?"
    rf"|(?:{_MONTHS})\s+\d{{4}}"
    rf"|(?:{_WEEKDAYS})"
    r"|yesterday|tomorrow|tonight|(?:last|next|this)\s+(?:week|month|year|weekend))\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:[.,:]\d+)*%?")
_APOSTROPHES = "'\u2019"
_WORD = re.compile(rf"[^\W\d_](?:[\w{_APOSTROPHES}-]*[^\W_])?")
"""A word of letters (any script; digits, apostrophes and hyphens inside)."""
_OPENERS = ' \t"\u201c(*-\u2022'
"""What may stand between a sentence's end and its first word."""
_SENTENCE_ENDS = ".!?:;\n\u3002\uff01\uff1f"
_NOT_NAMES = frozenset(
    (
        "i i'm i've i'd i'll ok okay yes no oh hey hi hello thanks thank "
        f"{_MONTHS.replace('|', ' ')} {_WEEKDAYS.replace('|', ' ')}"
    ).split()
)


@dataclass(frozen=True)
class KeyTerms:
    """The names, numbers and dates of a text (lower-cased)."""

    names: frozenset[str] = field(default_factory=frozenset)
    numbers: frozenset[str] = field(default_factory=frozenset)
    dates: frozenset[str] = field(default_factory=frozenset)

    def all(self) -> frozenset[str]:
        return self.names | self.numbers | self.dates

    def __or__(self, other: KeyTerms) -> KeyTerms:
        return KeyTerms(self.names | other.names, self.numbers | other.numbers, self.dates | other.dates)

    @property
    def kinds(self) -> dict[str, frozenset[str]]:
        return {"names": self.names, "numbers": self.numbers, "dates": self.dates}


def _opens_sentence(text: str, start: int) -> bool:
    index = start - 1
    while index >= 0 and text[index] in _OPENERS:
        index -= 1
    return index < 0 or text[index] in _SENTENCE_ENDS


def _capitalised_runs(text: str) -> list[tuple[bool, list[str]]]:
    """Runs of capitalised words one space apart, each with whether it opens a sentence."""
    runs: list[tuple[bool, list[str]]] = []
    end = -1
    for match in _WORD.finditer(text):
        word = match[0]
        if not word[0].isupper():
            end = -1
            continue
        if end >= 0 and text[end : match.start()] == " ":
            runs[-1][1].append(word)
        else:
            runs.append((_opens_sentence(text, match.start()), [word]))
        end = match.end()
    return runs


def _is_name(word: str) -> bool:
    return len(word) > 1 and word.lower().strip(_APOSTROPHES) not in _NOT_NAMES


def _names(text: str, known: frozenset[str]) -> set[str]:
    names: set[str] = set()
    for opens, run in _capitalised_runs(text):
        # A sentence's first word is capitalised anyway: a name only when known as one.
        words = run[1:] if opens and run[0].lower() not in known else run
        kept = [w for w in words if _is_name(w)]
        if kept:
            names.add(" ".join(kept).lower())
    return names


def capitalised_mid_sentence(texts: Iterable[str]) -> frozenset[str]:
    """Words the texts capitalise where a sentence does not start: names wherever they appear."""
    seen: set[str] = set()
    for text in texts:
        for opens, words in _capitalised_runs(text):
            seen.update(w.lower() for w in (words[1:] if opens else words) if _is_name(w))
    return frozenset(seen)


def key_terms(text: str, known_names: frozenset[str] = frozenset()) -> KeyTerms:
    """The terms of `text`; `known_names` (`capitalised_mid_sentence` over the whole source)
    lets a name that opens a sentence count."""
    dates = {" ".join(m[0].lower().split()) for m in _DATE.finditer(text)}
    undated = _DATE.sub(" ", text)
    numbers = {m[0] for m in _NUMBER.finditer(undated)}
    return KeyTerms(frozenset(_names(undated, known_names)), frozenset(numbers), frozenset(dates))


@dataclass(frozen=True)
class Coverage:
    """Per kind, how many of the source's terms a summary still says."""

    kept: dict[str, int]
    total: dict[str, int]

    def share(self, kind: str | None = None) -> float:
        kinds = [kind] if kind else list(self.total)
        total = sum(self.total[k] for k in kinds)
        return 1.0 if total == 0 else sum(self.kept[k] for k in kinds) / total


def coverage(source: KeyTerms, summary_text: str) -> Coverage:
    """The share of the source's terms that `summary_text` contains (a term counts when its
    words appear in the summary, case-insensitively, as a whole word)."""
    said = " ".join(summary_text.lower().split())
    kept: dict[str, int] = {}
    total: dict[str, int] = {}
    for kind, terms in source.kinds.items():
        total[kind] = len(terms)
        kept[kind] = sum(1 for t in terms if re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", said) is not None)
    return Coverage(kept, total)
