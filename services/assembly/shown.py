"""Which recalled exchanges the host's raw turns already show (packing leaves those out).

A recalled exchange counts as shown when it contains the first `SHOWN_PREFIX_CHARS` of one of
the raw messages' texts (both normalised: single spaces, lower case). Rather than searching
every exchange for every raw text, an exchange is searched only for the texts whose anchor word
(their longest whole inner word) it contains: an exact necessary condition, checked by one set
intersection per exchange.
"""

from __future__ import annotations

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


@lru_cache(maxsize=REMEMBERED_ITEMS)
def _normal_item(content: str) -> str:
    return _normal(content)


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
        self._contents = [_normal_item(m.content) if m.kind == "turn" else "" for m in memories]
        self._words = [_words(c) if c else frozenset() for c in self._contents]
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
                shown = _text_of(message)
                if len(shown.text) < MIN_SHOWN_CHARS:
                    continue
                if shown.anchor:
                    by_anchor.setdefault(shown.anchor, []).append(shown.text)
                else:
                    unanchored.append(shown.text)
        anchors = frozenset(by_anchor)
        contents = self._contents
        return [
            i
            for i in (range(len(contents)) if among is None else among)
            if not (contents[i] and self._contains_any(i, contents[i], anchors, by_anchor, unanchored))
        ]

    def _contains_any(
        self,
        item: int,
        content: str,
        anchors: frozenset[str],
        by_anchor: dict[str, list[str]],
        unanchored: list[str],
    ) -> bool:
        if any(map(content.__contains__, unanchored)):
            return True
        return any(text in content for word in self._words[item] & anchors for text in by_anchor[word])
