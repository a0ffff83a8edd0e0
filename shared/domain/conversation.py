"""Building host-neutral conversation messages (what an agent host sends the engine)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

from contextengine.v1 import common_pb2

Role = common_pb2.MessageRole


def text_message(
    role: Role.ValueType, text: str, msg_id: str = "", when: datetime | None = None
) -> common_pb2.ConversationMessage:
    """A message with one text block, stamped with `when` (the host's message time) if given."""
    message = common_pb2.ConversationMessage(
        id=msg_id, role=role, content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))]
    )
    if when is not None:
        message.timestamp.FromDatetime(when)
    return message


def tool_call_message(
    msg_id: str, call_id: str, name: str, arguments: Mapping[str, object]
) -> common_pb2.ConversationMessage:
    """An assistant message calling one tool with JSON `arguments`."""
    call = common_pb2.ToolCallBlock(
        id=call_id, name=name, arguments=common_pb2.JsonValue(json=json.dumps(arguments))
    )
    return common_pb2.ConversationMessage(
        id=msg_id, role=Role.MESSAGE_ROLE_ASSISTANT, content=[common_pb2.ContentBlock(tool_call=call)]
    )


def tool_result_message(msg_id: str, call_id: str, name: str, output: str) -> common_pb2.ConversationMessage:
    """The tool-result message answering the call `call_id` with text `output`."""
    result = common_pb2.ToolResultBlock(
        tool_call_id=call_id,
        tool_name=name,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=output))],
    )
    return common_pb2.ConversationMessage(
        id=msg_id, role=Role.MESSAGE_ROLE_TOOL_RESULT, content=[common_pb2.ContentBlock(tool_result=result)]
    )
