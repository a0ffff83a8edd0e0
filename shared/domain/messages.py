"""Host conversation messages: validation at the edge and the plain-text views the engine needs.

Used by every service that receives `ConversationMessage`s (assembly, capture). Errors name the
offending field as a dotted path, e.g. `messages[3].content[0].tool_result.tool_call_id`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.v1 import common_pb2

from shared.domain.identity import check_free_text_id
from shared.domain.json_text import check_json_text
from shared.errors import InvalidArgument
from shared.sized_cache import MessageKey, SizedCache, message_key

MAX_MESSAGES = 20_000
"""Most messages one request may carry."""
MAX_TEXT_CHARS = 2_000_000
"""Longest single text, thinking or JSON field."""
MAX_ID_CHARS = 512
"""Longest message or tool-call id."""

_ROLES = frozenset(
    {
        common_pb2.MESSAGE_ROLE_USER,
        common_pb2.MESSAGE_ROLE_ASSISTANT,
        common_pb2.MESSAGE_ROLE_TOOL_RESULT,
        common_pb2.MESSAGE_ROLE_SYSTEM,
    }
)


def _check_size(value: str, field: str) -> None:
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidArgument(field, f"is longer than {MAX_TEXT_CHARS} characters")


def _check_json(value: common_pb2.JsonValue, field: str, *, require_object: bool = False) -> None:
    if not value.json:
        return
    _check_size(value.json, field)
    check_json_text(value.json, field, require_object=require_object)


def validate_json_object(value: common_pb2.JsonValue, field: str) -> None:
    """An optional JSON object field: empty, or valid JSON whose top level is an object."""
    _check_json(value, field, require_object=True)


def _check_plain_block(block: common_pb2.ContentBlock, field: str) -> None:
    """Blocks allowed inside a tool result: text and images."""
    kind = block.WhichOneof("block")
    if kind == "text":
        _check_size(block.text.text, f"{field}.text.text")
    elif kind == "image":
        if not block.image.uri:
            raise InvalidArgument(f"{field}.image.uri", "is required")
        _check_size(block.image.uri, f"{field}.image.uri")
    elif kind is None:
        raise InvalidArgument(field, "is empty (set one of text, image)")
    else:
        raise InvalidArgument(field, f"{kind} is not allowed inside a tool result")


@dataclass(frozen=True, slots=True)
class MessageShape:
    """What the engine needs from a valid message beyond its text: the tool calls it makes and the
    tool call it answers. Depends on the message's content only, so it is cached by content."""

    key: MessageKey
    role: common_pb2.MessageRole.ValueType
    call_ids: tuple[str, ...]
    answers: str
    """The tool_call_id a TOOL_RESULT message answers ("" for other messages)."""
    call_names: tuple[str, ...] = ()
    """The tool names of `call_ids`, in the same order."""


ValidatedMessages = SizedCache[MessageKey, MessageShape]
"""Shapes of messages already validated, by content (a host resends its whole transcript)."""
VALIDATED_MESSAGES = 100_000
"""Messages whose validation a replica remembers (~100 B each)."""


def check_message_count(count: int, field: str = "messages") -> None:
    if count > MAX_MESSAGES:
        raise InvalidArgument(field, f"has more than {MAX_MESSAGES} messages")


class TranscriptCheck:
    """Validation of one transcript, message by message in order: whether a tool result is in
    place depends on the messages before it (the call it answers came earlier)."""

    def __init__(self, field: str = "messages", calls: frozenset[str] = frozenset()) -> None:
        """`calls`: the tool calls of messages already checked before the next one."""
        self._field = field
        self.calls = set(calls)

    def new(self, index: int, message: common_pb2.ConversationMessage, key: MessageKey) -> MessageShape:
        """Validate a message not seen before; raise `InvalidArgument` naming its bad field."""
        shape = _validate_message(message, key, f"{self._field}[{index}]", self.calls)
        self.calls.update(shape.call_ids)
        return shape

    def known(self, index: int, shape: MessageShape) -> MessageShape:
        """A message validated by an earlier call (same content): only its place is checked."""
        if shape.answers and shape.answers not in self.calls:
            raise InvalidArgument(
                f"{self._field}[{index}].content[0].tool_result.tool_call_id",
                "does not match an earlier assistant tool call",
            )
        self.calls.update(shape.call_ids)
        return shape


def validate_messages(
    messages: Sequence[common_pb2.ConversationMessage],
    field: str = "messages",
    *,
    validated: ValidatedMessages | None = None,
) -> list[MessageShape]:
    """Each message's shape; raise `InvalidArgument` naming the first malformed message field.

    Rules: a known role; every content block set; tool calls only in assistant messages, with
    an id and a name; a TOOL_RESULT message holds exactly one tool_result block whose
    tool_call_id matches an earlier assistant tool call; JSON fields parse; sizes bounded.
    A message found in `validated` (same content, checked by an earlier call) is not checked
    again; only its place in this transcript (the call it answers came earlier) is.
    """
    check_message_count(len(messages), field)
    check = TranscriptCheck(field)
    shapes: list[MessageShape] = []
    for i, message in enumerate(messages):
        key = message_key(message)
        shape = validated.get(key) if validated is not None else None
        if shape is not None:
            shapes.append(check.known(i, shape))
            continue
        shape = check.new(i, message, key)
        if validated is not None:
            validated.put(key, shape)
        shapes.append(shape)
    return shapes


class MessageKeys:
    """Content keys of one call's messages: those its validation found, the rest computed."""

    def __init__(
        self,
        messages: Sequence[common_pb2.ConversationMessage] = (),
        shapes: Sequence[MessageShape] = (),
    ) -> None:
        self._known = {id(m): (m, s.key) for m, s in zip(messages, shapes, strict=True)}

    def extended(
        self,
        messages: Sequence[common_pb2.ConversationMessage],
        shapes: Sequence[MessageShape],
        start: int,
    ) -> MessageKeys:
        """The keys of `messages`, these keys being those of (at least) `messages[:start]`."""
        if len(self._known) > 2 * len(messages):  # mostly messages no longer sent: start over
            return MessageKeys(messages, shapes)
        keys = MessageKeys()
        keys._known = self._known.copy()
        keys._known.update((id(m), (m, s.key)) for m, s in zip(messages[start:], shapes[start:], strict=True))
        return keys

    def __call__(self, message: common_pb2.ConversationMessage) -> MessageKey:
        hit = self._known.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        return message_key(message)


def _validate_message(
    message: common_pb2.ConversationMessage, key: MessageKey, at: str, seen_calls: set[str]
) -> MessageShape:
    if message.role not in _ROLES:
        raise InvalidArgument(f"{at}.role", "must be USER, ASSISTANT, TOOL_RESULT or SYSTEM")
    check_free_text_id(message.id, f"{at}.id", max_chars=MAX_ID_CHARS)
    _check_json(message.host_fields, f"{at}.host_fields.json", require_object=True)
    if message.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT:
        answers = _validate_tool_result_message(message, at, seen_calls)
        return MessageShape(key, message.role, (), answers)
    calls: set[str] = set()
    for j, block in enumerate(message.content):
        _validate_block(block, message.role, f"{at}.content[{j}]", calls)
    made = [block.tool_call for block in message.content if block.HasField("tool_call")]
    return MessageShape(key, message.role, tuple(c.id for c in made), "", tuple(c.name for c in made))


def _validate_block(
    block: common_pb2.ContentBlock, role: common_pb2.MessageRole.ValueType, where: str, seen_calls: set[str]
) -> None:
    kind = block.WhichOneof("block")
    if kind == "tool_call":
        if role != common_pb2.MESSAGE_ROLE_ASSISTANT:
            raise InvalidArgument(where, "tool_call blocks are only allowed in ASSISTANT messages")
        call = block.tool_call
        if not call.id:
            raise InvalidArgument(f"{where}.tool_call.id", "is required")
        check_free_text_id(call.id, f"{where}.tool_call.id", max_chars=MAX_ID_CHARS)
        check_free_text_id(call.name, f"{where}.tool_call.name", max_chars=MAX_ID_CHARS)
        if not call.name:
            raise InvalidArgument(f"{where}.tool_call.name", "is required")
        _check_json(call.arguments, f"{where}.tool_call.arguments.json")
        seen_calls.add(call.id)
    elif kind == "tool_result":
        raise InvalidArgument(where, "tool_result blocks are only allowed in TOOL_RESULT messages")
    elif kind == "thinking":
        _check_size(block.thinking.thinking, f"{where}.thinking.thinking")
        _check_size(block.thinking.signature, f"{where}.thinking.signature")
    else:
        _check_plain_block(block, where)


def _validate_tool_result_message(
    message: common_pb2.ConversationMessage, at: str, seen_calls: set[str]
) -> str:
    results = [j for j, block in enumerate(message.content) if block.WhichOneof("block") == "tool_result"]
    if len(message.content) != 1 or len(results) != 1:
        raise InvalidArgument(
            f"{at}.content", "a TOOL_RESULT message must hold exactly one tool_result block"
        )
    where = f"{at}.content[0].tool_result"
    result = message.content[0].tool_result
    if not result.tool_call_id:
        raise InvalidArgument(f"{where}.tool_call_id", "is required")
    check_free_text_id(result.tool_name, f"{where}.tool_name", max_chars=MAX_ID_CHARS)
    if result.tool_call_id not in seen_calls:
        raise InvalidArgument(f"{where}.tool_call_id", "does not match an earlier assistant tool call")
    _check_json(result.details, f"{where}.details.json")
    for k, block in enumerate(result.content):
        _check_plain_block(block, f"{where}.content[{k}]")
    return result.tool_call_id


def message_texts(message: common_pb2.ConversationMessage) -> list[str]:
    """Every piece of text a model would read from `message` (for token counting)."""
    texts: list[str] = []
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            texts.append(block.text.text)
        elif kind == "thinking":
            texts.append(block.thinking.thinking)
        elif kind == "tool_call":
            texts.extend((block.tool_call.name, block.tool_call.arguments.json))
        elif kind == "tool_result":
            texts.append(block.tool_result.tool_name)
            texts.extend(inner.text.text for inner in block.tool_result.content if inner.HasField("text"))
    return texts


def image_count(message: common_pb2.ConversationMessage) -> int:
    """Image blocks in `message`, including those inside tool results."""
    count = 0
    for block in message.content:
        if block.HasField("image"):
            count += 1
        elif block.HasField("tool_result"):
            count += sum(1 for inner in block.tool_result.content if inner.HasField("image"))
    return count


def plain_text(message: common_pb2.ConversationMessage) -> str:
    """The message's text blocks joined by newlines (no thinking, tool calls or results)."""
    return "\n".join(block.text.text for block in message.content if block.HasField("text"))


def tool_call_ids(message: common_pb2.ConversationMessage) -> list[str]:
    return [block.tool_call.id for block in message.content if block.HasField("tool_call")]


def tool_result_call_id(message: common_pb2.ConversationMessage) -> str:
    """The tool_call_id a TOOL_RESULT message answers ("" for other messages)."""
    for block in message.content:
        if block.HasField("tool_result"):
            return block.tool_result.tool_call_id
    return ""
