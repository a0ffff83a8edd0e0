"""Host conversation fixtures for the capture tests."""

from __future__ import annotations

import json

from contextengine.v1 import common_pb2
from google.protobuf.timestamp_pb2 import Timestamp

Role = common_pb2.MessageRole


def text(t: str) -> common_pb2.ContentBlock:
    return common_pb2.ContentBlock(text=common_pb2.TextBlock(text=t))


def user(t: str, *, mid: str = "", ts: int = 0) -> common_pb2.ConversationMessage:
    message = common_pb2.ConversationMessage(id=mid, role=Role.MESSAGE_ROLE_USER, content=[text(t)])
    if ts:
        message.timestamp.CopyFrom(Timestamp(seconds=ts, nanos=123_000_000))
    return message


def assistant(t: str, *, mid: str = "") -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=mid,
        role=Role.MESSAGE_ROLE_ASSISTANT,
        content=[text(t)],
        host_fields=common_pb2.JsonValue(json='{"provider":"anthropic","usage":{"input":12,"output":7}}'),
    )


def tool_call(
    call_id: str, name: str, arguments: str, *, thinking: str = ""
) -> common_pb2.ConversationMessage:
    content = []
    if thinking:
        content.append(
            common_pb2.ContentBlock(thinking=common_pb2.ThinkingBlock(thinking=thinking, signature="sig=="))
        )
    content.append(text("Let me look that up."))
    content.append(
        common_pb2.ContentBlock(
            tool_call=common_pb2.ToolCallBlock(
                id=call_id, name=name, arguments=common_pb2.JsonValue(json=arguments)
            )
        )
    )
    return common_pb2.ConversationMessage(role=Role.MESSAGE_ROLE_ASSISTANT, content=content)


def tool_result(
    call_id: str, name: str, output: str, *, is_error: bool = False
) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_TOOL_RESULT,
        content=[
            common_pb2.ContentBlock(
                tool_result=common_pb2.ToolResultBlock(
                    tool_call_id=call_id,
                    tool_name=name,
                    content=[text(output)],
                    is_error=is_error,
                    details=common_pb2.JsonValue(json='{"exit":0, "lines":[1,2]}'),
                )
            )
        ],
    )


RECALLED_URI = "viking://~/memories/preferences/dark-theme.md"


def injected_recall(call_id: str) -> list[common_pb2.ConversationMessage]:
    """What assembly injects for auto recall: an assistant tool call and its tool result."""
    marker = common_pb2.JsonValue(json=json.dumps({"contextengine_injected": "memory_recall_auto"}))
    call = tool_call(call_id, "memory_recall_auto", '{"query":"dark theme"}')
    del call.content[0]
    call.id = f"ce-injected-memory_recall_auto-call-{call_id}"
    call.host_fields.CopyFrom(marker)
    result = tool_result(
        call_id,
        "memory_recall_auto",
        json.dumps({"memories": [{"uri": RECALLED_URI, "content": "User prefers dark theme"}]}),
    )
    result.id = f"ce-injected-memory_recall_auto-result-{call_id}"
    result.host_fields.CopyFrom(marker)
    return [call, result]


def conversation(turns: int, *, prefix: str = "turn") -> list[common_pb2.ConversationMessage]:
    """`turns` user/assistant exchanges, the odd ones with a tool call in between."""
    messages: list[common_pb2.ConversationMessage] = []
    for i in range(turns):
        messages.append(
            user(f"{prefix} {i}: please check the deployment status of service {i}", ts=1_700_000_000 + i)
        )
        if i % 2:
            call_id = f"call{prefix}{i}"
            messages.append(tool_call(call_id, "shell", f'{{"cmd": "kubectl get pods -n ns{i}",  "n":{i}}}'))
            messages.append(tool_result(call_id, "shell", f"pod-{i} Running\nready 1/1"))
        messages.append(assistant(f"{prefix} {i}: service {i} is healthy."))
    return messages
