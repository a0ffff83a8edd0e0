"""Host messages as `TurnEnvelope`s, for the packet's `recent_raw_turns` (docs/design.md §5.1)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from contextengine.v1 import common_pb2, envelope_pb2

from shared.domain.identity import RequestIdentity
from shared.domain.messages import MessageKeys
from shared.domain.turns import Turn
from shared.sized_cache import MessageKey, SizedCache

_ROLES = {
    common_pb2.MESSAGE_ROLE_USER: envelope_pb2.ENVELOPE_ROLE_USER,
    common_pb2.MESSAGE_ROLE_ASSISTANT: envelope_pb2.ENVELOPE_ROLE_ASSISTANT,
    common_pb2.MESSAGE_ROLE_TOOL_RESULT: envelope_pb2.ENVELOPE_ROLE_TOOL,
    common_pb2.MESSAGE_ROLE_SYSTEM: envelope_pb2.ENVELOPE_ROLE_SYSTEM,
}


def _status(is_error: bool) -> envelope_pb2.ToolStatus.ValueType:
    return envelope_pb2.TOOL_STATUS_ERROR if is_error else envelope_pb2.TOOL_STATUS_SUCCESS


def _result_text(block: common_pb2.ToolResultBlock) -> str:
    return "\n".join(inner.text.text for inner in block.content if inner.HasField("text"))


def message_envelope(
    message: common_pb2.ConversationMessage, sequence: int, identity: RequestIdentity
) -> envelope_pb2.TurnEnvelope:
    digest = hashlib.sha256(
        f"{identity.buffer_key}\x1f{sequence}\x1f".encode() + message.SerializeToString(deterministic=True)
    ).hexdigest()[:32]
    envelope = envelope_pb2.TurnEnvelope(
        turn_id=digest,
        sequence=sequence,
        role=_ROLES.get(message.role, envelope_pb2.ENVELOPE_ROLE_UNSPECIFIED),
        host_message_id=message.id,
        agent_id=identity.agent_id,
        compaction_marker=envelope_pb2.CompactionMarker(source=envelope_pb2.COMPACTION_SOURCE_RAW),
    )
    if message.HasField("timestamp"):
        envelope.timestamp.CopyFrom(message.timestamp)
    for block in message.content:
        if block.HasField("text"):
            envelope.parts.add(text=envelope_pb2.TextPart(text=block.text.text))
        elif block.HasField("tool_call"):
            call = block.tool_call
            envelope.parts.add(
                tool_call=envelope_pb2.ToolCallPart(
                    tool_call_id=call.id, tool_name=call.name, arguments=call.arguments
                )
            )
            envelope.tool_calls.add(tool_call_id=call.id, tool_name=call.name, arguments=call.arguments)
        elif block.HasField("tool_result"):
            result = block.tool_result
            value = (
                common_pb2.JsonValue(json=result.details.json)
                if result.details.json
                else common_pb2.JsonValue()
            )
            text = _result_text(result)
            envelope.parts.add(
                tool_result=envelope_pb2.ToolResultPart(
                    tool_call_id=result.tool_call_id,
                    tool_name=result.tool_name,
                    result=value,
                    status=_status(result.is_error),
                )
            )
            envelope.tool_results.add(
                tool_call_id=result.tool_call_id,
                tool_name=result.tool_name,
                result=value,
                status=_status(result.is_error),
            )
            if text:
                envelope.parts.add(text=envelope_pb2.TextPart(text=text))
    return envelope


ENVELOPES = 20_000
"""Envelopes a replica remembers: a host resends its recent turns on every call."""

EnvelopeCache = SizedCache[tuple[str, int, MessageKey], envelope_pb2.TurnEnvelope]
"""Envelopes by (stream, sequence, message content); read-only once built."""


def turn_envelopes(
    turns: Sequence[Turn],
    identity: RequestIdentity,
    cache: EnvelopeCache | None = None,
    keys: MessageKeys | None = None,
) -> list[envelope_pb2.TurnEnvelope]:
    key_of = keys or MessageKeys()
    out: list[envelope_pb2.TurnEnvelope] = []
    for turn in turns:
        for offset, message in enumerate(turn.messages):
            sequence = turn.start + offset
            if cache is None:
                out.append(message_envelope(message, sequence, identity))
                continue
            key = (identity.buffer_key, sequence, key_of(message))
            envelope = cache.get(key)
            if envelope is None:
                envelope = message_envelope(message, sequence, identity)
                cache.put(key, envelope)
            out.append(envelope)
    return out
