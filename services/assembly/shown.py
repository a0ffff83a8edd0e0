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
from collections.abc import Sequence
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
    """Which recalled exchanges the raw turns already show. An exchange is only searched for the
    raw texts whose anchor word it contains (a set intersection), so the cost follows the matches,
    not items x texts."""

    def __init__(self, memories: Sequence[MemoryForInjection]) -> None:
        self._lines = [_message_lines(m.content) if m.kind == "turn" else () for m in memories]
        self._last: tuple[tuple[int, ...], list[int]] | None = None
        """The last whole answer, by the identities of the raw messages it was for."""

    def not_shown(self, raw: Sequence[Turn], among: Sequence[int] | None = None) -> list[int]:
        """Indexes of the items that are not raw exchanges already among `raw` (best first),
        only of those `among` when given (in their order)."""
        if among is not None:
            return self._not_shown(raw, among)
        # Packing asks again once the raw turns are kept; unless one was left out or elided,
        # they are the very same messages.
        messages = tuple(id(message) for turn in raw for message in turn.messages)
        if self._last is None or self._last[0] != messages:
            self._last = (messages, self._not_shown(raw, None))
        return list(self._last[1])

    def _not_shown(self, raw: Sequence[Turn], among: Sequence[int] | None) -> list[int]:
        by_anchor: dict[str, list[str]] = {}
        unanchored: list[str] = []
        for turn in raw:
            for message in turn.messages:
                raw_text = _text_of(message)
                if len(raw_text.text) < MIN_SHOWN_CHARS:
                    continue
                if raw_text.anchor:
                    by_anchor.setdefault(raw_text.anchor, []).append(raw_text.text)
                else:
                    unanchored.append(raw_text.text)
        anchors = frozenset(by_anchor)
        lines = self._lines

        def shown(line: str) -> bool:  # holds a raw message's text
            if any(map(line.__contains__, unanchored)):
                return True
            return any(text in line for word in _words(line) & anchors for text in by_anchor[word])

        return [
            i
            for i in (range(len(lines)) if among is None else among)
            if not (lines[i] and all(shown(line) for line in lines[i]))
        ]
