"""Which recalled exchanges the host's raw turns already show (packing leaves those out).

A recalled exchange counts as shown when each of its messages (a line of the item: tool-call and
tool-output lines aside, unless it has nothing else) contains the first `SHOWN_PREFIX_CHARS` of
one of the raw messages' texts (both normalised: single spaces, lower case). Every message, not
any: small talk recurs ("Ha! Maple is a character, I swear."), and an exchange pairing a fact with
a reply the raw window happens to repeat was left out, its fact shown nowhere (measured on the
hard recall tier's continuing session: 4-5 points of evidence recall at every budget). Rather
than searching every line for every raw text, a line is searched only for the texts whose anchor
word (their longest whole inner word) it contains: an exact necessary condition, checked by one
set intersection per line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from contextengine.v1 import common_pb2

from services.assembly.injection import MemoryForInjection
from shared.domain.messages import plain_text
from shared.domain.turns import Turn
from shared.sized_cache import SizedCache

REMEMBERED_ITEMS = 8_192
"""Recalled items whose normalised text a process remembers (they recur)."""
REMEMBERED_TEXTS = 20_000
"""Raw messages whose normalised text a process remembers."""


def _normal(text: str) -> str:
    return " ".join(text.split()).lower()


_TOOL_LINE = re.compile(r"^(?:\w+: )?\[")
"""A tool call's or tool output's line (`assistant: [calls ...]`, `tool: [x returned] ...`)."""


@lru_cache(maxsize=REMEMBERED_ITEMS)
def _message_lines(content: str) -> tuple[str, ...]:
    """The normalised lines of an item that must be shown for the item to count as shown."""
    lines = [line for line in content.split("\n") if line.strip()]
    said = [line for line in lines if not _TOOL_LINE.match(line)]
    return tuple(_normal(line) for line in said or lines)


SHOWN_PREFIX_CHARS = 200
"""A recalled exchange counts as shown when it contains this much of a raw message's text."""
MIN_SHOWN_CHARS = 12
"""Shorter raw texts (`ok`, `thanks`) say nothing about which exchange is shown."""


@dataclass(frozen=True, slots=True)
class _ShownText:
    text: str
    """The message's normalised text, its first `SHOWN_PREFIX_CHARS`."""
    anchor: str
    """Its longest whole inner word: an exchange containing `text` contains this word ("": none)."""


def _shown_text(message: common_pb2.ConversationMessage) -> _ShownText:
    text = _normal(plain_text(message))[:SHOWN_PREFIX_CHARS]
    inner = text.split(" ")[1:-1]  # the first and last words may be cut
    return _ShownText(text, max(inner, key=len) if inner else "")


_SHOWN_TEXTS: SizedCache[int, tuple[common_pb2.ConversationMessage, _ShownText]] = SizedCache(
    REMEMBERED_TEXTS
)
"""By message identity: host messages are the same objects call after call (`host_messages`)."""


def _text_of(message: common_pb2.ConversationMessage) -> _ShownText:
    hit = _SHOWN_TEXTS.get(id(message))
    if hit is not None and hit[0] is message:
        return hit[1]
    shown = _shown_text(message)
    _SHOWN_TEXTS.put(id(message), (message, shown))
    return shown


@lru_cache(maxsize=REMEMBERED_ITEMS)
def _words(content: str) -> frozenset[str]:
    return frozenset(content.split(" "))


class ShownExchanges:
    """Which recalled exchanges the raw turns already show, item by item as packing reaches them
    (it stops at the first that does not fit: most of what recall offers is never asked about).
    An exchange is only searched for the raw texts whose anchor word it contains (a set
    intersection), so the cost follows the matches, not items x texts."""

    def __init__(self, memories: Sequence[MemoryForInjection]) -> None:
        self._memories = memories
        self._last: tuple[tuple[int, ...], _ShownBy] | None = None
        """The last raw turns asked about, by the identities of their messages."""

    def by(self, raw: Sequence[Turn]) -> Callable[[int], bool]:
        """Whether item `index` is a raw exchange already among `raw`. Packing asks again once the
        raw turns are kept; unless one was left out or elided, they are the very same messages,
        and the answers given so far stand."""
        messages = tuple(id(message) for turn in raw for message in turn.messages)
        if self._last is None or self._last[0] != messages:
            self._last = (messages, _ShownBy(self._memories, raw))
        return self._last[1].shows


class _ShownBy:
    """The raw texts of some turns, indexed by anchor word, and the items judged so far."""

    def __init__(self, memories: Sequence[MemoryForInjection], raw: Sequence[Turn]) -> None:
        self._memories = memories
        self._by_anchor: dict[str, list[str]] = {}
        self._unanchored: list[str] = []
        for turn in raw:
            for message in turn.messages:
                raw_text = _text_of(message)
                if len(raw_text.text) < MIN_SHOWN_CHARS:
                    continue
                if raw_text.anchor:
                    self._by_anchor.setdefault(raw_text.anchor, []).append(raw_text.text)
                else:
                    self._unanchored.append(raw_text.text)
        self._anchors = frozenset(self._by_anchor)
        self._judged: dict[int, bool] = {}

    def shows(self, index: int) -> bool:
        judged = self._judged.get(index)
        if judged is None:
            memory = self._memories[index]
            lines = _message_lines(memory.content) if memory.kind == "turn" else ()
            judged = bool(lines) and all(map(self._holds_raw_text, lines))
            self._judged[index] = judged
        return judged

    def _holds_raw_text(self, line: str) -> bool:
        if any(map(line.__contains__, self._unanchored)):
            return True
        by_anchor = self._by_anchor
        return any(text in line for word in _words(line) & self._anchors for text in by_anchor[word])
