"""Host messages <-> TurnEnvelopes <-> OpenViking session messages, losslessly.

Each host message becomes one OpenViking message:
- OpenViking-native parts carry what OpenViking understands (text, tool call/result as tool
  parts), so its token accounting, summaries and memory extraction see the real conversation;
- `turn_id` is the engine's stable id; `source_message_ids` holds the turn id, the host message
  id and a compact sidecar: the host message with its top-level texts elided (they are the text
  parts, in order). The sidecar makes the round trip exact: JSON arguments byte for byte,
  thinking blocks and signatures, image references, host fields and timestamps;
- the memories the engine injected for a message (its used context) are OpenViking `context`
  parts, so OpenViking keeps its own record of which memories a turn used;
- a message of a fenced turn (CommitTurn) also carries the turn's provenance in
  `source_message_ids`: the host's advancement key and admission/terminal anchors, verbatim.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from contextengine.v1 import common_pb2, envelope_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from shared.domain.json_text import openviking_view
from shared.openviking.models.parts import (
    ContextPart,
    MessageKind,
    NewMessage,
    SendablePart,
    TextPart,
    ToolPart,
)
from shared.openviking.models.sessions import SessionMessage

SIDECAR_PREFIX = "ce1:"
HOST_ID_PREFIX = "host:"
PROVENANCE_PREFIX = "turn:"
TURN_ID_PREFIX = "ct-"

Role = common_pb2.MessageRole

_OV_ROLE = {
    Role.MESSAGE_ROLE_USER: "user",
    Role.MESSAGE_ROLE_ASSISTANT: "assistant",
    Role.MESSAGE_ROLE_TOOL_RESULT: "tool",
    Role.MESSAGE_ROLE_SYSTEM: "system",
}
_MESSAGE_KIND: dict[int, MessageKind] = {
    Role.MESSAGE_ROLE_USER: "user_query",
    Role.MESSAGE_ROLE_ASSISTANT: "assistant_step",
    Role.MESSAGE_ROLE_TOOL_RESULT: "tool_transport",
}
_ENVELOPE_ROLE = {
    Role.MESSAGE_ROLE_USER: envelope_pb2.ENVELOPE_ROLE_USER,
    Role.MESSAGE_ROLE_ASSISTANT: envelope_pb2.ENVELOPE_ROLE_ASSISTANT,
    Role.MESSAGE_ROLE_TOOL_RESULT: envelope_pb2.ENVELOPE_ROLE_TOOL,
    Role.MESSAGE_ROLE_SYSTEM: envelope_pb2.ENVELOPE_ROLE_SYSTEM,
}


def _json(value: object) -> common_pb2.JsonValue:
    return common_pb2.JsonValue(json=json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def message_fingerprint(message: common_pb2.ConversationMessage) -> str:
    return hashlib.sha256(message.SerializeToString(deterministic=True)).hexdigest()


def turn_id_for(stream_id: str, sequence: int, message: common_pb2.ConversationMessage) -> str:
    """Stable id of the message at `sequence` of a stream; retries and replicas derive the same."""
    return f"{TURN_ID_PREFIX}{stream_id[:12]}-{sequence:07d}-{message_fingerprint(message)[:10]}"


def sequence_of(turn_id: str) -> int | None:
    if not turn_id.startswith(TURN_ID_PREFIX):
        return None
    try:
        return int(turn_id.split("-")[2])
    except (IndexError, ValueError):
        return None


def result_text(block: common_pb2.ToolResultBlock) -> str:
    return "\n".join(part.text.text for part in block.content if part.HasField("text"))


def _encode_sidecar(message: common_pb2.ConversationMessage) -> str:
    elided = common_pb2.ConversationMessage()
    elided.CopyFrom(message)
    for block in elided.content:
        if block.HasField("text"):
            block.text.text = ""
    packed = zlib.compress(elided.SerializeToString(deterministic=True), 6)
    return SIDECAR_PREFIX + base64.urlsafe_b64encode(packed).decode()


def _decode_sidecar(value: str) -> common_pb2.ConversationMessage:
    message = common_pb2.ConversationMessage()
    message.ParseFromString(zlib.decompress(base64.urlsafe_b64decode(value[len(SIDECAR_PREFIX) :])))
    return message


def _timestamp_text(message: common_pb2.ConversationMessage) -> str | None:
    if not message.HasField("timestamp"):
        return None
    return message.timestamp.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def openviking_parts(message: common_pb2.ConversationMessage) -> list[SendablePart]:
    parts: list[SendablePart] = []
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            parts.append(TextPart(text=block.text.text))
        elif kind == "tool_call":
            call = block.tool_call
            parts.append(
                ToolPart(
                    tool_id=call.id,
                    tool_name=call.name,
                    tool_input=openviking_view(call.arguments.json),
                    tool_status="running",
                )
            )
        elif kind == "tool_result":
            res = block.tool_result
            parts.append(
                ToolPart(
                    tool_id=res.tool_call_id,
                    tool_name=res.tool_name,
                    tool_output=result_text(res),
                    tool_status="error" if res.is_error else "completed",
                )
            )
    if not parts:
        # OpenViking needs content; a message of only thinking/images keeps an empty text part.
        parts.append(TextPart(text=""))
    return parts


@dataclass(frozen=True)
class PersistedTurn:
    """A host message as stored: its position, ids and the exact host shape."""

    turn_id: str
    sequence: int
    message: common_pb2.ConversationMessage
    openviking_message_id: str = ""
    used_context_uris: tuple[str, ...] = ()


def openviking_message(
    stream_id: str,
    sequence: int,
    message: common_pb2.ConversationMessage,
    used_context_uris: Sequence[str] = (),
    provenance: str = "",
) -> NewMessage:
    """The OpenViking add-message body for one host message; the memories the engine injected
    for it are recorded as OpenViking `context` parts (its native "used context" record)."""
    turn_id = turn_id_for(stream_id, sequence, message)
    used = [ContextPart(uri=uri, context_type="memory") for uri in used_context_uris]
    return NewMessage(
        role=_OV_ROLE.get(message.role, "user"),
        parts=(*openviking_parts(message), *used),
        created_at=_timestamp_text(message),
        turn_id=turn_id,
        message_kind=_MESSAGE_KIND.get(message.role),
        source_message_ids=(
            turn_id,
            HOST_ID_PREFIX + message.id,
            _encode_sidecar(message),
            *((provenance,) if provenance else ()),
        ),
    )


def turn_provenance(advancement_key: str, admission_json: str, terminal_json: str) -> str:
    """The `source_message_ids` entry naming the fenced turn a message belongs to."""
    value = {
        "advancementKey": advancement_key,
        "admission": json.loads(admission_json) if admission_json else None,
        "terminal": json.loads(terminal_json) if terminal_json else None,
    }
    return PROVENANCE_PREFIX + json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def provenance_of(stored: SessionMessage) -> dict[str, object] | None:
    """The fenced-turn provenance of a stored message (None outside a fenced turn)."""
    entry = next((s for s in stored.source_message_ids if s.startswith(PROVENANCE_PREFIX)), None)
    if entry is None:
        return None
    value: dict[str, object] = json.loads(entry[len(PROVENANCE_PREFIX) :])
    return value


def persisted_turn(stored: SessionMessage) -> PersistedTurn | None:
    """The host message back from an OpenViking message the engine wrote (None for others)."""
    sidecar = next((s for s in stored.source_message_ids if s.startswith(SIDECAR_PREFIX)), None)
    sequence = sequence_of(stored.turn_id or "")
    if sidecar is None or sequence is None or stored.turn_id is None:
        return None
    message = _decode_sidecar(sidecar)
    texts = iter(part.text for part in stored.parts if isinstance(part, TextPart))
    for block in message.content:
        if block.HasField("text"):
            block.text.text = next(texts, "")
    used = tuple(part.uri for part in stored.parts if isinstance(part, ContextPart))
    return PersistedTurn(stored.turn_id, sequence, message, stored.id, used)


def turn_envelope(
    turn: PersistedTurn, *, openviking_session_id: str, agent_id: str, checkpoint_id: str = ""
) -> envelope_pb2.TurnEnvelope:
    """The TurnEnvelope (docs/design.md §5.1) view of a persisted message."""
    message = turn.message
    envelope = envelope_pb2.TurnEnvelope(
        turn_id=turn.turn_id,
        session_id=openviking_session_id,
        sequence=turn.sequence,
        role=_ENVELOPE_ROLE.get(message.role, envelope_pb2.ENVELOPE_ROLE_UNSPECIFIED),
        host_message_id=message.id,
        agent_id=agent_id,
        used_context_uris=turn.used_context_uris,
        compaction_marker=envelope_pb2.CompactionMarker(
            source=envelope_pb2.COMPACTION_SOURCE_POST_COMPACT
            if checkpoint_id
            else envelope_pb2.COMPACTION_SOURCE_RAW,
            compact_checkpoint_id=checkpoint_id,
        ),
    )
    if message.HasField("timestamp"):
        envelope.timestamp.CopyFrom(message.timestamp)
    else:
        envelope.timestamp.CopyFrom(Timestamp(seconds=int(datetime.now(UTC).timestamp())))
    for block in message.content:
        _add_block(envelope, block)
    return envelope


def _add_block(envelope: envelope_pb2.TurnEnvelope, block: common_pb2.ContentBlock) -> None:
    kind = block.WhichOneof("block")
    if kind == "text":
        envelope.parts.add(text=envelope_pb2.TextPart(text=block.text.text))
    elif kind == "tool_call":
        call = block.tool_call
        envelope.parts.add(
            tool_call=envelope_pb2.ToolCallPart(
                tool_call_id=call.id, tool_name=call.name, arguments=call.arguments
            )
        )
        envelope.tool_calls.add(tool_call_id=call.id, tool_name=call.name, arguments=call.arguments)
    elif kind == "tool_result":
        res = block.tool_result
        status = envelope_pb2.TOOL_STATUS_ERROR if res.is_error else envelope_pb2.TOOL_STATUS_SUCCESS
        result = _json(result_text(res))
        envelope.parts.add(
            tool_result=envelope_pb2.ToolResultPart(
                tool_call_id=res.tool_call_id, tool_name=res.tool_name, result=result, status=status
            )
        )
        envelope.tool_results.add(
            tool_call_id=res.tool_call_id, tool_name=res.tool_name, result=result, status=status
        )
    elif kind == "thinking":
        envelope.parts.add(meta=envelope_pb2.MetaPart(key="thinking", value=_json(block.thinking.thinking)))
    elif kind == "image":
        image = {"uri": block.image.uri, "mime_type": block.image.mime_type}
        envelope.parts.add(meta=envelope_pb2.MetaPart(key="image", value=_json(image)))


def texts_of(message: common_pb2.ConversationMessage) -> Iterable[str]:
    """Every text the model reads in a message (for token counting and queries)."""
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            yield block.text.text
        elif kind == "tool_call":
            yield block.tool_call.name
            yield block.tool_call.arguments.json
        elif kind == "tool_result":
            yield result_text(block.tool_result)
        elif kind == "thinking":
            yield block.thinking.thinking
