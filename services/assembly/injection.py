"""Messages the engine adds to the host's transcript, marked so capture can recognise them.

Auto recall is injected as a synthetic tool exchange (docs/design.md §3.3): an assistant message with a
`memory_recall_auto` tool call, immediately followed by its tool result, so the model sees the
retrieval action and its bounds the same way as an explicit `memory_recall`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import NamedTuple

from contextengine.v1 import common_pb2

from services.assembly.recall_json import recall_json_pieces

INJECTED_ID_PREFIX = "ce-injected-"
"""Every engine-injected message's `ConversationMessage.id` starts with this."""
INJECTED_MARKER_KEY = "contextengine_injected"
"""Key of the host_fields JSON marker; its value says what was injected."""
AUTO_RECALL_TOOL = "memory_recall_auto"
AUTO_RECALL_SOURCE = "openviking-auto-recall"
EXPLICIT_RECALL_SOURCE = "openviking-recall"
SUMMARY_MARKER = "session_summary"
SUMMARY_HEADER = "[Session History Summary]"
TOOL_CALL_ID_LENGTH = 9
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class MemoryForInjection(NamedTuple):
    """What the model is shown of one recalled memory."""

    uri: str
    category: str
    content: str
    score: float
    kind: str = "memory"
    """`memory` or `turn` (a raw exchange; `memory_expand(uri)` returns its exact messages)."""
    said_at: str = ""
    """`YYYY-MM-DD HH:MM` UTC when known."""


def tool_call_id_for(*parts: str) -> str:
    """A deterministic 9-character [A-Za-z0-9] id (strict providers accept exactly this shape)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    value = int.from_bytes(digest[:16], "big")
    chars = []
    for _ in range(TOOL_CALL_ID_LENGTH):
        value, index = divmod(value, len(_ALPHABET))
        chars.append(_ALPHABET[index])
    return "".join(chars)


def recall_tool_result_json(memories: Sequence[MemoryForInjection], source: str) -> str:
    """`{"memories": ["<when> <what> ref=<handle>", ...], "source": ...}` as the model sees it
    (`services.assembly.recall_json`)."""
    return "".join(recall_json_pieces(memories, source))


def _marker(kind: str) -> common_pb2.JsonValue:
    return common_pb2.JsonValue(json=json.dumps({INJECTED_MARKER_KEY: kind}))


def injected_recall_pair(
    query: str, memories: Sequence[MemoryForInjection], call_id: str
) -> tuple[common_pb2.ConversationMessage, common_pb2.ConversationMessage]:
    """The assistant tool call and its tool result, in that order, sharing `call_id`."""
    return recall_pair(query, recall_tool_result_json(memories, AUTO_RECALL_SOURCE), call_id)


def recall_pair(
    query: str, result_json: str, call_id: str
) -> tuple[common_pb2.ConversationMessage, common_pb2.ConversationMessage]:
    """The pair around an already built tool result JSON (`recall_json_pieces`, joined)."""
    call = common_pb2.ConversationMessage(
        id=f"{INJECTED_ID_PREFIX}{AUTO_RECALL_TOOL}-call-{call_id}",
        role=common_pb2.MESSAGE_ROLE_ASSISTANT,
        content=[
            common_pb2.ContentBlock(
                tool_call=common_pb2.ToolCallBlock(
                    id=call_id,
                    name=AUTO_RECALL_TOOL,
                    arguments=common_pb2.JsonValue(json=json.dumps({"query": query}, ensure_ascii=False)),
                )
            )
        ],
        host_fields=_marker(AUTO_RECALL_TOOL),
    )
    result = common_pb2.ConversationMessage(
        id=f"{INJECTED_ID_PREFIX}{AUTO_RECALL_TOOL}-result-{call_id}",
        role=common_pb2.MESSAGE_ROLE_TOOL_RESULT,
        content=[
            common_pb2.ContentBlock(
                tool_result=common_pb2.ToolResultBlock(
                    tool_call_id=call_id,
                    tool_name=AUTO_RECALL_TOOL,
                    content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=result_json))],
                )
            )
        ],
        host_fields=_marker(AUTO_RECALL_TOOL),
    )
    return call, result


def summary_message(overviews: Sequence[str]) -> common_pb2.ConversationMessage:
    """One user message `[Session History Summary]\\n...` carrying the compact summaries."""
    body = "\n\n".join(o.strip() for o in overviews if o.strip())
    text = f"{SUMMARY_HEADER}\n{body}"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return common_pb2.ConversationMessage(
        id=f"{INJECTED_ID_PREFIX}{SUMMARY_MARKER}-{digest}",
        role=common_pb2.MESSAGE_ROLE_USER,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
        host_fields=_marker(SUMMARY_MARKER),
    )


def is_engine_injected(message: common_pb2.ConversationMessage) -> bool:
    """True for messages this engine added (by id prefix or host_fields marker)."""
    if message.id.startswith(INJECTED_ID_PREFIX):
        return True
    if INJECTED_MARKER_KEY not in message.host_fields.json:
        return False
    try:
        fields = json.loads(message.host_fields.json)
    except ValueError:
        return False
    return isinstance(fields, dict) and INJECTED_MARKER_KEY in fields
