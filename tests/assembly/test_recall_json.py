"""The recall tool result's JSON built and counted by pieces equals the JSON and its count
(properties over any content, in every shipped encoding)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from services.assembly.injection import MemoryForInjection, recall_tool_result_json
from services.assembly.recall_json import item_text, pieces_tokens, recall_json_pieces
from shared.domain.recall_handles import TurnHandle, parse_turn_handle, session_digest
from shared.tokens import SHIPPED_ENCODINGS, TokenCounter

TEXT = st.text(st.characters(codec="utf-8"), max_size=120) | st.sampled_from(
    [
        "",
        " ",
        "0.5}, {",
        '", "score": 1',
        '", "',
        "x\n\n  ",
        "  trailing  ",
        "數字 123 ü",
        "\\u0000",
        ",",
        " ,",
    ]
)
URIS = TEXT | st.builds(
    lambda session, seq: f"viking://user/u/memories/ce-turns/{session}/{seq:07d}.md",
    st.from_regex(r"ce-[0-9a-f]{20}-g[0-9]", fullmatch=True),
    st.integers(0, 9_999_999),
)
memories = st.lists(
    st.builds(
        MemoryForInjection,
        uri=URIS,
        category=TEXT,
        content=TEXT,
        score=st.floats(0, 1),
        kind=st.sampled_from(["memory", "turn"]),
        said_at=st.sampled_from(["", "2026-01-10 09:04"]),
    ),
    max_size=6,
)


def reference_json(items: list[MemoryForInjection], source: str) -> str:
    """The JSON as one `json.dumps` writes it: each item one string."""
    return json.dumps({"memories": [item_text(m) for m in items], "source": source}, ensure_ascii=False)


@settings(max_examples=300)
@given(memories, st.sampled_from(["openviking-auto-recall", "openviking-recall"]))
def test_pieces_make_the_json_and_count_its_tokens(items: list[MemoryForInjection], source: str) -> None:
    text = reference_json(items, source)
    assert recall_tool_result_json(items, source) == text
    pieces = recall_json_pieces(items, source)
    for encoding in SHIPPED_ENCODINGS:
        counter = TokenCounter(encoding)
        assert pieces_tokens(counter, pieces) == len(counter.encode(text))


def test_an_exchange_item_says_its_day_once_and_its_handle() -> None:
    turn = MemoryForInjection(
        "viking://user/alice/memories/ce-turns/ce-0123456789abcdef0123-g2/0000012.md",
        "conversation",
        "user: I adopted a beagle called Biscuit\nassistant: Congratulations!",
        0.71,
        kind="turn",
        said_at="2026-03-04 14:05",
    )
    [item] = json.loads(recall_tool_result_json([turn], "openviking-auto-recall"))["memories"]
    assert item.startswith("2026-03-04 user: I adopted a beagle called Biscuit\nassistant:")
    handle = item.rsplit(" ref=", 1)[1]
    assert parse_turn_handle(handle) == TurnHandle(session_digest("ce-0123456789abcdef0123-g2"), 12)
    assert item.count("2026-03-04") == 1
    assert "14:05" not in item and "viking://" not in item and "0.71" not in item


def test_a_memory_item_keeps_its_category_and_a_uri_in_the_callers_space() -> None:
    memory = MemoryForInjection(
        "viking://user/alice/memories/preferences/tea-3f2a1b2c.md", "preferences", "likes green tea", 0.8
    )
    [item] = json.loads(recall_tool_result_json([memory], "openviking-recall"))["memories"]
    assert item == "preferences: likes green tea ref=viking://~/memories/preferences/tea-3f2a1b2c.md"
