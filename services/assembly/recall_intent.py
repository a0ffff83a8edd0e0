"""Recall intent: before any retrieval, decide whether this prompt needs recall at all, from which
sources, and what the query says about time and names (design Phase 3, "recall intent analyzer").

A pure function of the prompt and the newest messages, LLM-free. It departs from the issue's
"rules plus the embedding model already loaded" on measured grounds: the engine process loads no
embedding model (OpenViking's embedder sits behind HTTP), and asking it would cost the very call
this stage exists to save; rules alone met the targets of `tests/bench/phase3` (no-recall prompts:
recall calls and tokens down 100 %, with every recall-needing prompt of the stream still recalled).

No recall for: an empty prompt, a greeting or acknowledgement ("thanks!", "ok 好的"), and a
follow-up the recent turns already answer ("make that shorter", "translate it into French",
"continue"): a rewrite of or reference to the newest answer whose content words all occur in the
recent turns. A question about facts (who/when/where/what was ..., remember ...) is never treated
as such a follow-up, so evidence recall is untouched.

Sources when recall runs: memories and exchanges always; skills and tools for a prompt that asks
for work to be done (a request frame: "can you", "please", "I need to", an imperative verb; not
a question about the past), which keeps skills out of small talk the similarity floor cannot
tell from a task ("tell me a joke" scores like "lint my backup"); the directory at the start of a stream or
when the prompt asks what is stored. Compact summaries are the session's own history, not recall:
they are always read. Tool experience also runs with no prompt recall when the newest messages
hold tool calls (a tool loop iteration), since those calls name the tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from contextengine.v1 import common_pb2, packet_pb2

from services.assembly.injection import is_engine_injected
from services.assembly.lexical import content_terms
from services.assembly.recall_query import RecallQuery, recall_query, sanitize_user_text
from shared.domain.messages import plain_text

RECENT_MESSAGES = 6
"""Newest host messages whose text can answer a follow-up."""


class RecallSource(IntEnum):
    MEMORIES = packet_pb2.RECALL_SOURCE_MEMORIES
    EXCHANGES = packet_pb2.RECALL_SOURCE_EXCHANGES
    SUMMARIES = packet_pb2.RECALL_SOURCE_SUMMARIES
    SKILLS = packet_pb2.RECALL_SOURCE_SKILLS
    TOOLS = packet_pb2.RECALL_SOURCE_TOOLS
    DIRECTORY = packet_pb2.RECALL_SOURCE_DIRECTORY


_FOLLOW_UP = re.compile(
    r"\b(that|this|it|those|these|above|previous|your (answer|reply|last)|you just|"
    r"continue|go on|keep going|more|shorter|longer|simpler|rephrase|reword|translate|"
    r"summari[sz]e|elaborate|expand on|again|repeat)\b|"
    r"(继续|再说|上面|刚才|缩短|翻译|详细)",
    re.IGNORECASE,
)
_FOLLOW_UP_WORDS = frozenset(
    (  # noqa: SIM905 - a word list reads better as text
        "continue keep going more shorter longer simpler rephrase reword translate translated "
        "summarise summarize summary elaborate expand again repeat above previous answer reply last "
        "point first second third fourth next bullet bullets list paragraph sentence version "
        "english french german spanish chinese japanese italian portuguese russian korean "
        "formal casual friendlier tone briefly brief detail details example examples explain "
        "means mean meant why really less fewer words shorten lengthen bit little clearer plain "
    ).split()
)
_FACT_QUESTION = re.compile(
    r"\b(who|when|where|which|remember|recall|told|mentioned|said|did (i|we)|"
    r"what (was|were|did|is my|are my))\b",
    re.IGNORECASE,
)
_PAST_QUESTION = re.compile(
    r"\b(remember|recall|remind me|last time|did (i|we|you)|told you|mentioned|"
    r"we (discussed|talked|decided|agreed)|my \w+ (is|was))\b",
    re.IGNORECASE,
)
_DIRECTORY_QUESTION = re.compile(
    r"\b(what do you know|what have you (got|stored|saved)|"
    r"my (files|resources|documents|notes|memories|skills)|"
    r"(list|show) (my|the|your) (files|resources|documents|memories|skills)|what('s| is) (stored|saved))\b",
    re.IGNORECASE,
)
_TASK_REQUEST = re.compile(
    r"\b(can|could|would|will) you\b|\bplease\b|\bhelp me\b|\bi (need|want|would like|have) to\b|"
    r"\bhow (do|can|should|would) (i|we|you)\b|\blet'?s\b|"
    r"^(try|create|make|write|draft|build|convert|merge|combine|check|fix|run|use|generate|summari[sz]e|"
    r"translate|send|book|find|search|list|show|clean|deploy|update|add|remove|delete|rename|resize|"
    r"export|import|upload|download|analy[sz]e|review|validate|lint|test|set up|schedule|plan)\b|"
    r"(帮我|请|能不能|可以帮)",
    re.IGNORECASE,
)
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|"
    rf"\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b|"
    rf"\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS})(?: \d{{4}})?\b|"
    r"\b(?:yesterday|today|tonight|tomorrow|last (?:week|month|year|night|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday)|(?:\d+|a|two|three) (?:days|weeks|months|years) ago|"
    r"(?:on )?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b|"
    r"\d{4}年\d{1,2}月(?:\d{1,2}日)?|\d{1,2}月\d{1,2}日|昨天|今天|上周|上个月|去年",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"[\"“']([^\"”']{2,60})[\"”']")
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-zA-Z0-9]+(?:[ -][A-Z][a-zA-Z0-9]+)*)")
_NOT_NAMES = frozenset({"I", "I'm", "I've", "OK", "Ok", "The", "A", "An", "What", "When", "Who", "Where"})


@dataclass(frozen=True)
class RecallIntent:
    recall: bool
    """False: no memory, exchange, skill or directory recall for this prompt."""
    reason: str
    """Why recall is skipped (`empty`, `greeting`, `too_short`, `no_user_turn`, `follow_up`,
    `auto_recall_disabled`); empty when it runs."""
    sources: frozenset[RecallSource]
    query: str
    dates: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    directory_asked: bool = False
    """The prompt asks what is stored (else the directory is only for a stream's start)."""
    leans_on_earlier: bool = False
    """The prompt cannot stand alone (`recall_query.leans_on_earlier_turns`)."""

    def wants(self, source: RecallSource) -> bool:
        return source in self.sources

    def as_recall_query(self) -> RecallQuery:
        return RecallQuery(self.query if self.recall else "", self.reason, self.leans_on_earlier)

    def to_proto(self) -> packet_pb2.RecallIntent:
        return packet_pb2.RecallIntent(
            recall=self.recall,
            reason=self.reason,
            sources=[packet_pb2.RecallSource.ValueType(s) for s in sorted(self.sources)],
            query=self.query,
            dates=list(self.dates),
            names=list(self.names),
        )


def dates_in(text: str) -> tuple[str, ...]:
    """Date expressions in `text`, in order, each once (ISO, "March 3", "3 days ago", "昨天")."""
    return _distinct(m.group(0) for m in _DATE.finditer(text))


def names_in(text: str) -> tuple[str, ...]:
    """Quoted phrases and capitalised words or runs not opening a sentence ("Lena", "Blue Fox")."""
    found = [m.group(1) for m in _QUOTED.finditer(text)]
    found += [m.group(1) for m in _CAPITALISED.finditer(text) if m.group(1) not in _NOT_NAMES]
    return _distinct(found)


def _distinct(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _recent_texts(newest_first: Sequence[common_pb2.ConversationMessage]) -> list[str]:
    texts = []
    for message in newest_first[:RECENT_MESSAGES]:
        if message.role in (common_pb2.MESSAGE_ROLE_USER, common_pb2.MESSAGE_ROLE_ASSISTANT) and not (
            is_engine_injected(message)
        ):
            texts.append(sanitize_user_text(plain_text(message)))
    return texts


def _has_assistant_answer(newest_first: Sequence[common_pb2.ConversationMessage]) -> bool:
    return any(
        m.role == common_pb2.MESSAGE_ROLE_ASSISTANT and plain_text(m).strip()
        for m in newest_first[:RECENT_MESSAGES]
    )


def _has_tool_calls(newest_first: Sequence[common_pb2.ConversationMessage]) -> bool:
    return any(block.HasField("tool_call") for m in newest_first[:RECENT_MESSAGES] for block in m.content)


def is_answered_follow_up(prompt: str, recent_texts: Sequence[str]) -> bool:
    """True when `prompt` only works on the newest answer: it refers back to it or asks for a
    rewrite, asks no question of fact, and brings no content word the recent turns lack."""
    if not recent_texts or not _FOLLOW_UP.search(prompt) or _FACT_QUESTION.search(prompt):
        return False
    known = {term for text in recent_texts for term in content_terms(text)}
    return all(term in known or term in _FOLLOW_UP_WORDS for term in content_terms(prompt))


def recall_intent(
    newest_first: Sequence[common_pb2.ConversationMessage],
    window: int,
    prompt: str,
    *,
    auto_recall: bool = True,
) -> RecallIntent:
    """The decision for this call, from the prompt and the host's newest messages (newest first;
    only the last few are read). `query` is exactly `recall_query`'s, so what recall retrieves for a
    prompt that needs it does not change."""
    tools_from_calls = _has_tool_calls(newest_first)
    summaries_only = frozenset({RecallSource.SUMMARIES})
    tool_loop = summaries_only | {RecallSource.TOOLS} if tools_from_calls else summaries_only
    if not auto_recall:
        return RecallIntent(False, "auto_recall_disabled", tool_loop, "")
    base = recall_query(newest_first, window, prompt)
    if base.skip_reason:
        return RecallIntent(False, base.skip_reason, tool_loop, "")
    text = sanitize_user_text(prompt) or base.query.rsplit("\n", 1)[-1]
    recent = _recent_texts(newest_first)
    if text in recent:
        recent.remove(text)  # the prompt itself, already in the transcript, answers nothing
    if _has_assistant_answer(newest_first) and is_answered_follow_up(text, recent):
        return RecallIntent(False, "follow_up", tool_loop, "")
    sources = {RecallSource.MEMORIES, RecallSource.EXCHANGES, RecallSource.SUMMARIES}
    if _TASK_REQUEST.search(text) and not _PAST_QUESTION.search(text):
        sources |= {RecallSource.SKILLS, RecallSource.TOOLS}
    if tools_from_calls:
        sources.add(RecallSource.TOOLS)
    asked = bool(_DIRECTORY_QUESTION.search(text))
    if asked or not _has_assistant_answer(newest_first):
        sources.add(RecallSource.DIRECTORY)
    return RecallIntent(
        True, "", frozenset(sources), base.query, dates_in(text), names_in(text), asked, base.leans_on_earlier
    )
