"""The recall tool result's JSON: compact items, built from pieces that tokenize on their own.

The model reads `{"memories": ["2026-03-04 user: ...\\nassistant: ... ref=t418306755912.12",
...], "source": "openviking-auto-recall"}`: the `{"memories": [...], "source": ...}`
shape of docs/design.md §3.3, each item one string that says when it was said (once, not per line), what was
said, and the handle `memory_expand` takes (`shared.domain.recall_handles`). No score, kind, URI
or category keys: measured on long conversations (the recall issue), those took 82 of an
exchange's 171 tokens, and the model uses none of them. The day only, not the time: the time
took 4 of a median item's ~50 tokens, and questions about when ask for the day.

The JSON is counted on every Assemble, so it is cut where the pre-tokenizer of every shipped
encoding (`shared.tokens.SHIPPED_ENCODINGS`) splits anyway: between the `,` that ends an item and
the space that starts the next. BPE never merges across a pre-tokenizer split, so the JSON's
token count is the sum of its pieces' counts, and an item's piece (its text does not depend on
the query) is counted once per process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

from shared.domain.recall_handles import handle_for
from shared.tokens import TokenCounter

DAY_CHARS = len("2026-03-04")
"""What an item shows of `said_at` (`YYYY-MM-DD HH:MM`): the day."""
OPENING = '{"memories": ['
SEPARATOR = ","
REMEMBERED_ITEMS = 8_192
"""Items whose JSON string a process remembers (recalled memories and exchanges recur)."""


class RecalledForModel(Protocol):
    """What the model is shown of one recalled item (`MemoryForInjection`)."""

    @property
    def kind(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def said_at(self) -> str: ...
    @property
    def content(self) -> str: ...


def item_text(memory: RecalledForModel) -> str:
    """`<when> <what> ref=<handle>`: an exchange's text is its role-labelled messages; a stored
    memory's is `<category>: <content>`."""
    return _item_text(memory.kind, memory.uri, memory.category, memory.said_at, memory.content)


@lru_cache(maxsize=REMEMBERED_ITEMS)
def _item_text(kind: str, uri: str, category: str, said_at: str, content: str) -> str:
    what = content.strip() if kind == "turn" or not category else f"{category}: {content.strip()}"
    when = f"{said_at[:DAY_CHARS]} " if said_at else ""
    handle = handle_for(uri) if uri else ""
    return f"{when}{what} ref={handle}" if handle else f"{when}{what}"


@lru_cache(maxsize=REMEMBERED_ITEMS)
def _item_json(kind: str, uri: str, category: str, said_at: str, content: str) -> str:
    return json.dumps(_item_text(kind, uri, category, said_at, content), ensure_ascii=False)


def item_json(memory: RecalledForModel) -> str:
    return _item_json(memory.kind, memory.uri, memory.category, memory.said_at, memory.content)


def closing(source: str) -> str:
    return f'], "source": {json.dumps(source, ensure_ascii=False)}}}'


def item_piece(memory: RecalledForModel) -> str:
    """What an item adds in the middle of the list: ` "...",` (what packing pays per item)."""
    return f" {item_json(memory)}{SEPARATOR}"


def recall_json_pieces(memories: Sequence[RecalledForModel], source: str) -> list[str]:
    """The pieces whose concatenation is the tool result's JSON."""
    end = closing(source)
    if not memories:
        return [f"{OPENING}{end}"]
    pieces = [item_piece(memory) for memory in memories]
    pieces[0] = OPENING + pieces[0][1:]
    pieces[-1] = pieces[-1][: -len(SEPARATOR)] + end
    return pieces


def pieces_tokens(counter: TokenCounter, pieces: Sequence[str]) -> int:
    """The JSON's tokens: the sum of its pieces' (each piece's count is remembered by text)."""
    return sum(counter.count(piece) for piece in pieces)
