"""The turn index: every captured raw exchange as a small dated document OpenViking embeds.

OpenViking never vector-indexes session messages or archives, so without an LLM nothing said in
conversation could be recalled. Capture therefore also writes each *exchange* (a user message
and the assistant/tool messages after it, as delivered by one write) as one document in a folder
of the engine's own under the user's memories:

    viking://user/<user>/memories/ce-turns/<OpenViking session id>/<first sequence>.md

Under `memories/` because OpenViking returns a memory file's whole text as its `abstract` (up to
a few kB), so one `find` over `viking://~/memories` yields memories and exchanges with their text,
without `read_content` (which costs ~0.8 ms per hit); a folder of its own keeps the extractor's
typed folders (preferences, entities, ...) apart.

The unit is the exchange, not the message: a fact the user states is usually restated or
answered by the assistant, and either half finding the exchange brings both. Each line is one
message, dated with the host's message timestamp (capture time when the host sent none), so the
model can answer "when" questions. The URI names the OpenViking session and the first
sequence, so `ExpandMemory` resolves a hit to the exact original messages. Forgetting a session
is `rm -r` of its folder; the documents are tagged `ce=turn`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Final

from contextengine.v1 import common_pb2

from shared.domain.messages import plain_text

TURN_INDEX_DIR = "ce-turns"
TURN_INDEX_ROOT = f"viking://~/memories/{TURN_INDEX_DIR}"
TURN_TAG = "ce=turn"
TURN_PROCESSING_MODE: Final = "vectors_only"
"""How OpenViking processes an index write: the document's own vector only, no summaries of the
session folders above it (nothing reads them). Measured: ~15% less of OpenViking's CPU per
document than the default, the same hits (text as abstract, tags)."""
MAX_MESSAGE_CHARS = 1200
"""Longest text a message contributes to the document (tool outputs are cut; expand has all)."""

_ROLE_LABEL = {
    common_pb2.MESSAGE_ROLE_USER: "user",
    common_pb2.MESSAGE_ROLE_ASSISTANT: "assistant",
    common_pb2.MESSAGE_ROLE_TOOL_RESULT: "tool",
    common_pb2.MESSAGE_ROLE_SYSTEM: "system",
}
_URI = re.compile(
    rf"^viking://(?:~|user/(?P<user>[^/]+))/memories/{TURN_INDEX_DIR}/(?P<session>[^/]+)/(?P<seq>\d{{7}})\.md$"
)
_LINE = re.compile(r"^\[(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d)\] (?P<role>user|assistant|tool|system): ")


@dataclass(frozen=True)
class IndexedMessage:
    sequence: int
    message: common_pb2.ConversationMessage


@dataclass(frozen=True)
class TurnDocument:
    """One exchange as written to the index."""

    uri: str
    content: str


@dataclass(frozen=True)
class TurnRef:
    """Where an indexed exchange's messages live."""

    user_id: str | None
    """None for `viking://~/...` (the caller's own space)."""
    session_id: str
    first_sequence: int


def turn_uri(session_id: str, first_sequence: int) -> str:
    return f"{TURN_INDEX_ROOT}/{session_id}/{first_sequence:07d}.md"


def session_index_uri(session_id: str) -> str:
    return f"{TURN_INDEX_ROOT}/{session_id}"


PARSED_URIS = 65_536
"""Turn URIs whose parse a process remembers: recall sees the same ones call after call."""


@lru_cache(maxsize=PARSED_URIS)
def parse_turn_uri(uri: str) -> TurnRef | None:
    match = _URI.match(uri)
    if match is None:
        return None
    return TurnRef(match["user"], match["session"], int(match["seq"]))


def is_turn_uri(uri: str) -> bool:
    return parse_turn_uri(uri) is not None


def format_when(when: datetime) -> str:
    """`2026-01-10 09:04` (UTC): compact, sortable, what the model reads."""
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


SAID_TAG_KEY = "said"
"""Tag carrying when a stored memory was said: `said=YYYYMMDDHHMM` (UTC; tags are lower-cased)."""


def said_tag(when: datetime) -> str:
    return f"{SAID_TAG_KEY}={when.astimezone(UTC):%Y%m%d%H%M}"


def said_from_tags(tags: Sequence[str]) -> str:
    """`YYYY-MM-DD HH:MM` from a `said=` tag, "" without one."""
    for tag in tags:
        key, _, value = tag.partition("=")
        if key == SAID_TAG_KEY and len(value) == 12 and value.isdigit():
            return f"{value[:4]}-{value[4:6]}-{value[6:8]} {value[8:10]}:{value[10:]}"
    return ""


def said_at(message: common_pb2.ConversationMessage, fallback: datetime) -> datetime:
    return message.timestamp.ToDatetime(tzinfo=UTC) if message.HasField("timestamp") else fallback


def _message_text(message: common_pb2.ConversationMessage) -> str:
    """Text, tool calls (name and start of the arguments) and tool outputs; not thinking."""
    parts = [plain_text(message)]
    for block in message.content:
        if block.HasField("tool_call"):
            parts.append(f"[calls {block.tool_call.name}({block.tool_call.arguments.json[:200]})]")
        elif block.HasField("tool_result"):
            result = block.tool_result
            output = " ".join(inner.text.text for inner in result.content if inner.HasField("text"))
            parts.append(f"[{result.tool_name} returned] {output}")
    text = " ".join(" ".join(p.split()) for p in parts if p.strip())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 3].rstrip() + "..."
    return text


def message_line(message: common_pb2.ConversationMessage, when: datetime) -> str:
    return f"[{format_when(when)}] {_ROLE_LABEL.get(message.role, 'message')}: {_message_text(message)}"


def exchanges(messages: Sequence[IndexedMessage]) -> list[list[IndexedMessage]]:
    """Consecutive messages grouped into exchanges: each user message starts one."""
    groups: list[list[IndexedMessage]] = []
    for item in messages:
        if not groups or item.message.role == common_pb2.MESSAGE_ROLE_USER:
            groups.append([])
        groups[-1].append(item)
    return groups


def turn_documents(
    session_id: str, messages: Sequence[IndexedMessage], captured_at: datetime
) -> list[TurnDocument]:
    """The index documents for newly persisted messages (sequence order)."""
    documents = []
    for group in exchanges(messages):
        lines = [
            message_line(item.message, said_at(item.message, captured_at))
            for item in group
            if _message_text(item.message)
        ]
        if lines:
            documents.append(TurnDocument(turn_uri(session_id, group[0].sequence), "\n".join(lines)))
    return documents


def write_operations(documents: Sequence[TurnDocument]) -> list[dict[str, object]]:
    """The `batch-write` operations that store `documents` (replacing: a rewrite never duplicates)."""
    return [{"uri": d.uri, "content": d.content, "mode": "replace", "tags": [TURN_TAG]} for d in documents]


def document_date(content: str) -> str:
    """The date of an indexed exchange's first line (`2026-01-10 09:04`), "" when absent."""
    match = _LINE.match(content)
    return match["date"] if match else ""


REMEMBERED_DOCUMENTS = 8_192
"""Recalled documents whose model-facing text a process remembers."""


@lru_cache(maxsize=REMEMBERED_DOCUMENTS)
def undated(content: str) -> str:
    """An indexed exchange as the model reads it in a recalled item: `role: text` lines, without
    the date every line carries in the index (the item says it once). Remembered by content:
    recall reads the same documents call after call."""
    return "\n".join(_without_date(line) for line in content.splitlines())


def _without_date(line: str) -> str:
    match = _LINE.match(line)
    return f"{match['role']}: {line[match.end() :]}" if match else line


def document_texts(content: str) -> list[str]:
    """The message texts of an indexed exchange (date and role prefixes removed)."""
    texts: list[str] = []
    for line in content.splitlines():
        match = _LINE.match(line)
        if match:
            texts.append(line[match.end() :])
        elif texts:
            texts[-1] += "\n" + line
    return texts
