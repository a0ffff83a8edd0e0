"""Which recalled exchanges the raw turns already show: the anchor-word search finds exactly what
searching every message line of every exchange for every raw text finds (property), and an
exchange only one of whose messages is shown stays (its other message is shown nowhere else)."""

from __future__ import annotations

import re
from collections.abc import Callable

from contextengine.v1 import common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.injection import MemoryForInjection
from services.assembly.shown import MIN_SHOWN_CHARS, SHOWN_PREFIX_CHARS, ShownExchanges
from shared.domain.messages import plain_text
from shared.domain.turns import Turn
from tests.assembly.helpers import assistant, user

WORD = st.sampled_from(
    ["Deploy", "friday", "inc-48213", "the", "a", "postgres", "vacuum", "ok", "\n", "x" * 30]
)
TEXT = st.lists(WORD, min_size=1, max_size=8).map(" ".join) | st.lists(WORD, min_size=30, max_size=60).map(
    " ".join
)  # short texts, and texts longer than the compared prefix (cut mid-word)


def normal(text: str) -> str:
    return " ".join(text.split()).lower()


def reference(memories: list[MemoryForInjection], raw: list[Turn]) -> list[int]:
    texts = [normal(plain_text(m))[:SHOWN_PREFIX_CHARS] for turn in raw for m in turn.messages]
    texts = [t for t in texts if len(t) >= MIN_SHOWN_CHARS]

    def shown(m: MemoryForInjection) -> bool:
        lines = [line for line in m.content.split("\n") if line.strip()]
        said = [line for line in lines if not re.match(r"(\w+: )?\[", line)] or lines  # tool lines aside
        return all(any(t in normal(line) for t in texts) for line in said)

    return [i for i, m in enumerate(memories) if not (m.kind == "turn" and m.content.strip() and shown(m))]


@given(st.lists(TEXT, min_size=1, max_size=8), st.data())
def test_anchor_search_finds_what_a_full_search_finds(texts: list[str], data: st.DataObject) -> None:
    messages: list[common_pb2.ConversationMessage] = [
        user(t) if i % 2 == 0 else assistant(t) for i, t in enumerate(texts)
    ]
    raw = [Turn(i, (m,)) for i, m in enumerate(messages)]
    quoted = st.sampled_from(texts).map(lambda t: f"[2026-01-10] USER: {t.upper()}  and more")
    contents = data.draw(st.lists(quoted | TEXT, max_size=8))
    memories = [
        MemoryForInjection(f"u{i}", "c", content, 0.5, kind=data.draw(st.sampled_from(["turn", "memory"])))
        for i, content in enumerate(contents)
    ]
    cut = data.draw(st.integers(0, len(raw)))
    shown = ShownExchanges(memories)

    def not_shown(*shows: Callable[[int], bool]) -> list[int]:
        return [i for i in range(len(memories)) if not any(s(i) for s in shows)]

    newer = shown.by(raw[cut:])
    assert not_shown(newer) == reference(memories, raw[cut:])
    # The same messages in new turns (packing's kept turns) are the same question, answered alike.
    again = shown.by([Turn(t.start, t.messages) for t in raw[cut:]])
    assert not_shown(again) == reference(memories, raw[cut:])
    assert not_shown(shown.by(raw)) == reference(memories, raw)
    # What the newer or the older turns show, all of them show; not the converse: an exchange may
    # be shown half by the newer turns and half by the older (packing asks all of them, not each).
    assert set(not_shown(newer, shown.by(raw[:cut]))) >= set(reference(memories, raw))


def test_an_exchange_is_shown_only_when_each_of_its_messages_is() -> None:
    reply = "Ha! Maple is a character, I swear."
    fact = "Don't laugh, but I bought a secondhand ukulele off a neighbour."
    raw = [Turn(0, (user("How are the pets?"), assistant(reply)))]
    memories = [
        MemoryForInjection("u0", "c", f"user: {fact}\nassistant: {reply}", 0.5, kind="turn"),
        MemoryForInjection("u1", "c", f"user: How are the pets?\nassistant: {reply}", 0.5, kind="turn"),
        MemoryForInjection("u2", "c", f"assistant: {reply}\nassistant: [calls f({{}})]", 0.5, kind="turn"),
    ]
    shows = ShownExchanges(memories).by(raw)
    assert [i for i in range(len(memories)) if not shows(i)] == [0]
