"""The stand-in model an agent host (OpenClaw) talks to: scripted replies, OpenAI chat shapes.

Test-only. What OpenClaw 2026.9 sends (`openai-completions` provider): `stream: true`, `tools`
with `tool_choice: "auto"`, a long system prompt, the prompt as a user message, assistant
messages with `tool_calls` and `content: null`, `role: "tool"` results. It expects SSE
`chat.completion.chunk` deltas, a usage chunk and `data: [DONE]`.

The script lives in the prompt: each `[[call <tool> <json arguments>]]` in the user messages of
the current turn becomes one tool call, made in order, one per model request, until the turn
has as many of those calls as directives; then the model answers in text. The current turn is
everything after the newest final assistant answer (one without tool calls), so the history
and the engine's injected `memory_recall_auto` exchange are never mistaken for this turn.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

DIRECTIVE = re.compile(r"\[\[call (\w+) (\{.*?\})\]\]", re.DOTALL)
AUTO_RECALL_TOOL = "memory_recall_auto"


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: str
    """JSON text, sent verbatim as `function.arguments`."""


@dataclass(frozen=True)
class ChatReply:
    text: str = ""
    tool_calls: list[ScriptedCall] = field(default_factory=list)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


def content_text(message: dict[str, Any]) -> str:
    """The text of an OpenAI chat message (string or content-part list; null is empty)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def current_turn(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages after the newest final assistant answer."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "assistant" and not message.get("tool_calls"):
            return list(messages[i + 1 :])
    return [m for m in messages if m.get("role") != "system"]


def _calls_made(turn: Sequence[dict[str, Any]]) -> int:
    return sum(
        1
        for message in turn
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or []
        if call.get("function", {}).get("name") != AUTO_RECALL_TOOL
    )


def agent_reply(messages: Sequence[dict[str, Any]]) -> ChatReply:
    """The scripted reply to one agent request."""
    turn = current_turn(messages)
    directives = [
        ScriptedCall(match[1], match[2])
        for message in turn
        if message.get("role") == "user"
        for match in DIRECTIVE.finditer(content_text(message))
    ]
    made = _calls_made(turn)
    if made < len(directives):
        return ChatReply(tool_calls=[directives[made]])
    results = [content_text(m) for m in turn if m.get("role") == "tool"]
    prompt = next((content_text(m) for m in turn if m.get("role") == "user"), "")
    summary = f" after {len(results)} tool result(s)" if results else ""
    return ChatReply(text=f"Stand-in answer{summary} to: {' '.join(prompt.split())[:120]}")


def call_id_for(request_index: int, call: ScriptedCall) -> str:
    """A provider-style tool-call id: `call` + 8 hex characters (alphanumeric only)."""
    digest = hashlib.sha256(f"{request_index}:{call.name}:{call.arguments}".encode()).hexdigest()
    return f"call{digest[:8]}"


def _tool_calls_json(reply: ChatReply, request_index: int) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "id": call_id_for(request_index, call),
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for i, call in enumerate(reply.tool_calls)
    ]


def _usage(messages: Sequence[dict[str, Any]], reply: ChatReply) -> dict[str, int]:
    prompt = sum(len(content_text(m)) for m in messages) // 4 + 1
    completion = len(reply.text) // 4 + sum(len(c.arguments) // 4 for c in reply.tool_calls) + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion(
    model: str, reply: ChatReply, messages: Sequence[dict[str, Any]], request_index: int
) -> dict[str, Any]:
    """A non-streaming `chat.completion`."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls_json(reply, request_index)
    return {
        "id": f"chatcmpl-standin-{request_index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": _usage(messages, reply),
    }


def stream_events(
    model: str, reply: ChatReply, messages: Sequence[dict[str, Any]], request_index: int
) -> Iterator[bytes]:
    """The SSE body of a streamed reply: role, content or tool-call deltas, finish, usage, [DONE]."""
    base = {
        "id": f"chatcmpl-standin-{request_index}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + json.dumps({**base, "choices": choices, **extra}).encode() + b"\n\n"

    yield chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
    for start in range(0, len(reply.text), 40):
        yield chunk(
            [{"index": 0, "delta": {"content": reply.text[start : start + 40]}, "finish_reason": None}]
        )
    if reply.tool_calls:
        yield chunk(
            [
                {
                    "index": 0,
                    "delta": {"tool_calls": _tool_calls_json(reply, request_index)},
                    "finish_reason": None,
                }
            ]
        )
    yield chunk([{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}])
    yield chunk([], usage=_usage(messages, reply))
    yield b"data: [DONE]\n\n"
