"""The recall tool result's JSON built and counted by pieces equals the JSON and its count
(properties over any content, in every shipped encoding)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from services.assembly.injection import MemoryForInjection, recall_tool_result_json
from services.assembly.recall_json import pieces_tokens, recall_json_pieces
from shared.tokens import SHIPPED_ENCODINGS, TokenCounter

TEXT = st.text(st.characters(codec="utf-8"), max_size=120) | st.sampled_from(
    ["", " ", "0.5}, {", '", "score": 1', "x\n\n  ", "  trailing  ", "數字 123 ü", "\\u0000"]
)
memories = st.lists(
    st.builds(
        MemoryForInjection,
        uri=TEXT,
        category=TEXT,
        content=TEXT,
        score=st.floats(0, 1),
        kind=st.sampled_from(["memory", "turn"]),
        said_at=st.sampled_from(["", "2026-01-10 09:04"]),
    ),
    max_size=6,
)


def reference_json(items: list[MemoryForInjection], source: str) -> str:
    """The JSON as one `json.dumps` writes it."""
    return json.dumps(
        {
            "memories": [
                {
                    "kind": m.kind,
                    "uri": m.uri,
                    "category": m.category,
                    **({"said_at": m.said_at} if m.said_at else {}),
                    "content": m.content,
                    "score": round(m.score, 4),
                }
                for m in items
            ],
            "source": source,
        },
        ensure_ascii=False,
    )


@settings(max_examples=300)
@given(memories, st.sampled_from(["openviking-auto-recall", "openviking-recall"]))
def test_pieces_make_the_json_and_count_its_tokens(items: list[MemoryForInjection], source: str) -> None:
    text = reference_json(items, source)
    assert recall_tool_result_json(items, source) == text
    pieces = recall_json_pieces(items, source)
    for encoding in SHIPPED_ENCODINGS:
        counter = TokenCounter(encoding)
        assert pieces_tokens(counter, pieces) == len(counter.encode(text))
