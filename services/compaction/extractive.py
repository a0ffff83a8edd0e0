"""An LLM-free extractive summary: the sentences of a conversation that carry its facts.

Without an LLM, OpenViking's commit writes only a count-only placeholder ("12 turns, 24
messages"), so a continuing session's compacted part would never reach the model. This picks,
within a token cap, the sentences that say the most names, numbers and dates not said yet
(`services.compaction.key_terms`), a decision ("decided", "booked", "will") counting as one
more, the user's words a little more than the assistant's: greedy set cover by new terms per
token, so greetings and thanks (no terms) are never
picked and a fact repeated later is not paid twice. The picks are shown in conversation order,
one line per exchange under the date it was said:

    2023-05-07
    U: I moved to Denver in March for the job at Acme. | A: Congratulations on Acme!

The same selection runs over summaries' own sentences for a summary of summaries
(`services.compaction.history`): a `Sentence` keeps where it came from in `position`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.compaction.key_terms import Coverage, KeyTerms, capitalised_mid_sentence, coverage, key_terms

MAX_SENTENCE_TOKENS = 48
"""A longer sentence is cut at its commas (then its words) into pieces of at most this many."""
_LINE_TOKENS = 2
"""A line's framing ("U: ", " | ", the newline), paid once per exchange shown."""
_DATE_TOKENS = 6
"""A date header line, paid once per date shown."""
_DECISION = re.compile(
    r"\b(?:decid\w*|agree\w*|plan(?:s|ned|ning)?|chose|choose|will|going to|must|deadline|booked|"
    r"signed|bought|moved|started|quit|promis\w*)\b",
    re.IGNORECASE,
)
USER_WEIGHT = 1.25
"""The user's own words are the fact, the assistant's reply often only echoes it: a user sentence
counts this much more per token (an echo wins only when a fifth shorter)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])|\n+")
"""Where a sentence ends: . ! ? and a space, a CJK full stop, exclamation or question mark, a newline."""
MAX_WORD_CHARS = 40
"""A "word" longer than this (unspaced scripts: Chinese, Japanese) is cut every this many characters."""
_CLAUSE_END = re.compile(r"(?<=[,;])\s+")

Count = Callable[[str], int]


@dataclass(frozen=True)
class Sentence:
    """One sentence (or piece of a long one) as said."""

    position: tuple[int, ...]
    """Where it was said (exchange, then sentence order); sorts chronologically."""
    exchange: tuple[int, ...]
    """The exchange it belongs to: sentences of one exchange share a line."""
    said_on: str
    """YYYY-MM-DD, or "" when unknown."""
    role: str
    """"U" (the user) or "A" (the assistant)."""
    text: str


@dataclass(frozen=True)
class ExtractiveSummary:
    text: str
    tokens: int
    picked: tuple[Sentence, ...]
    """The sentences shown, in conversation order."""
    source_terms: KeyTerms
    coverage: Coverage


def split_sentences(text: str, count: Count) -> list[str]:
    """The sentences of a message; one over `MAX_SENTENCE_TOKENS` is cut at its commas, then at
    word boundaries, so a single long sentence cannot take the whole cap."""
    pieces: list[str] = []
    for said in _SENTENCE_END.split(text):
        sentence = " ".join(said.split())
        if not sentence:
            continue
        if count(sentence) <= MAX_SENTENCE_TOKENS:
            pieces.append(sentence)
            continue
        for clause in _CLAUSE_END.split(sentence):
            pieces += _cut_words(clause, count)
    return pieces


def _cut_words(text: str, count: Count) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    words = [w[i : i + MAX_WORD_CHARS] for w in text.split() for i in range(0, len(w), MAX_WORD_CHARS)]
    for word in words:
        if current and count(" ".join([*current, word])) > MAX_SENTENCE_TOKENS:
            out.append(" ".join(current))
            current = []
        current.append(word)
    if current:
        out.append(" ".join(current))
    return out


def render(picked: Sequence[Sentence]) -> str:
    """The summary text: a date header when the date changes, one line per exchange."""
    lines: list[str] = []
    day: str | None = None
    exchange: tuple[int, ...] | None = None
    role = ""
    for sentence in sorted(picked, key=lambda s: s.position):
        if sentence.said_on != day:
            day = sentence.said_on
            exchange = None
            if day:
                lines.append(day)
        if sentence.exchange != exchange:
            exchange, role = sentence.exchange, sentence.role
            lines.append(f"{role}: {sentence.text}")
        elif sentence.role != role:
            role = sentence.role
            lines[-1] += f" | {role}: {sentence.text}"
        else:
            lines[-1] += f" {sentence.text}"
    return "\n".join(lines)


@dataclass
class _Candidate:
    sentence: Sentence
    terms: frozenset[str]
    decision: bool
    tokens: int


def _gain(candidate: _Candidate, covered: set[str]) -> float:
    new = len(candidate.terms - covered)
    return new + (1.0 if new and candidate.decision else 0.0)


def summarise(
    sentences: Sequence[Sentence],
    *,
    max_tokens: int,
    count: Count,
    source_terms: KeyTerms | None = None,
) -> ExtractiveSummary:
    """The sentences, within `max_tokens`, that say the most of the source's terms.

    `source_terms` are what coverage is measured against (the raw turns' terms when these
    sentences are themselves a summary's); by default the sentences' own terms.
    """
    known = capitalised_mid_sentence(s.text for s in sentences)
    candidates = []
    own_terms = KeyTerms()
    for sentence in sentences:
        terms = key_terms(sentence.text, known)
        own_terms |= terms
        candidates.append(
            _Candidate(
                sentence,
                terms.all(),
                _DECISION.search(sentence.text) is not None,
                count(f"{sentence.role}: {sentence.text}") + 1,
            )
        )
    picked = _pick(candidates, max_tokens)
    text = render(picked)
    while picked and count(text) > max_tokens:  # the per-line framing was an estimate
        picked.pop()
        text = render(picked)
    source = source_terms if source_terms is not None else own_terms
    ordered = tuple(sorted(picked, key=lambda s: s.position))
    return ExtractiveSummary(text, count(text), ordered, source, coverage(source, text))


def _pick(candidates: list[_Candidate], max_tokens: int) -> list[Sentence]:
    """Greedy: the best new-terms-per-token sentence that still fits, until none adds a term.
    Returned best first, so trimming drops the least informative picks."""
    covered: set[str] = set()
    exchanges: set[tuple[int, ...]] = set()
    days: set[str] = set()
    room = max_tokens
    picked: list[Sentence] = []
    left = [c for c in candidates if c.terms]
    while left:
        best: _Candidate | None = None
        best_ratio = 0.0
        for candidate in left:
            cost = _cost(candidate, exchanges, days)
            gain = _gain(candidate, covered)
            if gain <= 0 or cost > room:
                continue
            ratio = gain / cost * (USER_WEIGHT if candidate.sentence.role == "U" else 1.0)
            if ratio > best_ratio:
                best, best_ratio = candidate, ratio
        if best is None:
            break
        room -= _cost(best, exchanges, days)
        covered |= best.terms
        exchanges.add(best.sentence.exchange)
        days.add(best.sentence.said_on)
        picked.append(best.sentence)
        left = [c for c in left if c is not best]
    return picked


def _cost(candidate: _Candidate, exchanges: set[tuple[int, ...]], days: set[str]) -> int:
    sentence = candidate.sentence
    framing = 0 if sentence.exchange in exchanges else _LINE_TOKENS
    dated = 0 if sentence.said_on in days or not sentence.said_on else _DATE_TOKENS
    return candidate.tokens + framing + dated
