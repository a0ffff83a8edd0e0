"""Hypothesis strategies for host transcripts over the whole `ConversationMessage` proto.

Every block kind (text, image, thinking with signature and redacted flag, tool call, tool result
with text/image content, details and error flag), every role, host fields, timestamps over the
whole protobuf range, text with line and paragraph separators (U+2028, U+2029, U+0085, CR, VT,
FF, FS/GS/RS), NUL, combining marks, BOM and astral-plane characters, and JSON texts with the
edge cases RFC 8259 allows (huge and tiny numbers, `-0`, 400-digit integers, escapes, surrogate
pair and lone surrogate escapes, odd whitespace). Transcripts are valid: tool results answer an
earlier call, ids carry no control characters.
"""

from __future__ import annotations

import json

from contextengine.v1 import common_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import strategies as st

Role = common_pb2.MessageRole

TRICKY_PIECES = (
    "\u2028", "\u2029", "\u0085", "\r\n", "\r", "\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
    "\x00", "\t", "\ufeff", "\u200d", "e\u0301", "\U0001f600", "\U00010348", "\U000e0001",
    "\U0010fffd", "<", "&", "\\", '"', "'", "{", "}", "\\u2028", " ", "",
)  # fmt: skip
NUMBER_LITERALS = (
    "0", "-0", "1", "-1", "1E400", "-1e400", "1e-400", "0.1", "1.0", "2.5e+10", "1E-7",
    "123456789012345678901234567890", "9007199254740993", "-9223372036854775809",
    "1" * 400, "0.000000000000000000000000000001", "3.141592653589793238462643383279",
)  # fmt: skip
STRING_ESCAPES = (
    "\\u2028", "\\u2029", "\\u0085", "\\ud83d\\ude00", "\\ud800", "\\udfff", "\\u0000", "\\/",
    "\\b", "\\f", "\\n", "\\r", "\\t", '\\"', "\\\\", "\\u00e9", "\u2028", "\u0085", "\U0001f600",
)  # fmt: skip
JSON_WHITESPACE = st.sampled_from(("", "", " ", "\n", "\t", "\r\n", "  \n\t "))

no_surrogates = st.characters(exclude_categories=("Cs",))
plain_chars = st.characters(exclude_categories=("Cs", "Cc"))

texts = st.lists(
    st.one_of(st.text(no_surrogates, max_size=24), st.sampled_from(TRICKY_PIECES)), max_size=8
).map("".join)
ids = st.text(plain_chars, min_size=1, max_size=24)


def _json_string_body() -> st.SearchStrategy[str]:
    """The inside of a JSON string: raw characters (escaped as JSON requires) and escapes."""
    raw = st.text(no_surrogates, max_size=12).map(lambda t: json.dumps(t, ensure_ascii=False)[1:-1])
    return st.lists(st.one_of(raw, st.sampled_from(STRING_ESCAPES)), max_size=5).map("".join)


json_strings = _json_string_body().map(lambda body: f'"{body}"')
json_scalars = st.one_of(
    st.sampled_from(("true", "false", "null")),
    st.sampled_from(NUMBER_LITERALS),
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr).filter(lambda r: "e" in r or "." in r),
    json_strings,
)


@st.composite
def _json_array(draw: st.DrawFn, items: st.SearchStrategy[str]) -> str:
    values = draw(st.lists(items, max_size=4))
    ws = draw(JSON_WHITESPACE)
    return "[" + ws + f"{ws},{ws}".join(values) + ws + "]"


@st.composite
def _json_object(draw: st.DrawFn, items: st.SearchStrategy[str]) -> str:
    pairs = draw(st.lists(st.tuples(json_strings, items), max_size=4))
    ws = draw(JSON_WHITESPACE)
    body = f"{ws},{ws}".join(f"{key}{ws}:{ws}{value}" for key, value in pairs)
    return "{" + ws + body + ws + "}"


json_values = st.recursive(
    json_scalars, lambda inner: st.one_of(_json_array(inner), _json_object(inner)), max_leaves=12
)


@st.composite
def json_texts(draw: st.DrawFn, *, object_only: bool = False) -> str:
    """RFC 8259 JSON text (an object when `object_only`), with surrounding whitespace."""
    value = draw(_json_object(json_values) if object_only else json_values)
    return draw(JSON_WHITESPACE) + value + draw(JSON_WHITESPACE)


optional_json = st.one_of(st.just(""), json_texts())
timestamps = st.one_of(
    st.none(),
    st.builds(
        Timestamp,
        seconds=st.integers(-62_135_596_800, 253_402_300_799),
        nanos=st.integers(0, 999_999_999),
    ),
)


def text_block() -> st.SearchStrategy[common_pb2.ContentBlock]:
    return texts.map(lambda t: common_pb2.ContentBlock(text=common_pb2.TextBlock(text=t)))


def image_block() -> st.SearchStrategy[common_pb2.ContentBlock]:
    uris = st.one_of(
        st.sampled_from(("https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo=")),
        texts.filter(bool),
    )
    mimes = st.sampled_from(("", "image/png", "image/jpeg", "image/webp"))
    return st.builds(
        lambda uri, mime: common_pb2.ContentBlock(image=common_pb2.ImageBlock(uri=uri, mime_type=mime)),
        uris,
        mimes,
    )


def thinking_block() -> st.SearchStrategy[common_pb2.ContentBlock]:
    return st.builds(
        lambda thinking, signature, redacted: common_pb2.ContentBlock(
            thinking=common_pb2.ThinkingBlock(thinking=thinking, signature=signature, redacted=redacted)
        ),
        texts,
        st.one_of(st.just(""), st.text(plain_chars, max_size=40)),
        st.booleans(),
    )


@st.composite
def tool_call_block(draw: st.DrawFn, call_id: str) -> common_pb2.ContentBlock:
    call = common_pb2.ToolCallBlock(
        id=call_id,
        name=draw(ids.filter(lambda n: n != "memory_recall_auto")),
        arguments=common_pb2.JsonValue(json=draw(optional_json)),
    )
    return common_pb2.ContentBlock(tool_call=call)


@st.composite
def tool_result_message(draw: st.DrawFn, call_id: str) -> common_pb2.ConversationMessage:
    result = common_pb2.ToolResultBlock(
        tool_call_id=call_id,
        tool_name=draw(st.one_of(st.just(""), ids.filter(lambda n: n != "memory_recall_auto"))),
        content=draw(st.lists(st.one_of(text_block(), image_block()), max_size=3)),
        is_error=draw(st.booleans()),
        details=common_pb2.JsonValue(json=draw(optional_json)),
    )
    return common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_TOOL_RESULT, content=[common_pb2.ContentBlock(tool_result=result)]
    )


@st.composite
def host_message(draw: st.DrawFn, call_ids: list[str]) -> common_pb2.ConversationMessage:
    """One message; assistant tool-call ids are appended to `call_ids` (results answer them)."""
    roles = [Role.MESSAGE_ROLE_USER, Role.MESSAGE_ROLE_ASSISTANT, Role.MESSAGE_ROLE_SYSTEM]
    if call_ids:
        roles.append(Role.MESSAGE_ROLE_TOOL_RESULT)
    role = draw(st.sampled_from(roles))
    if role == Role.MESSAGE_ROLE_TOOL_RESULT:
        message = draw(tool_result_message(draw(st.sampled_from(call_ids))))
    else:
        kinds = [text_block(), image_block(), thinking_block()]
        blocks = draw(st.lists(st.one_of(*kinds), max_size=4))
        if role == Role.MESSAGE_ROLE_ASSISTANT:
            for _ in range(draw(st.integers(0, 2))):
                call_id = f"{draw(ids)}#{len(call_ids)}"
                call_ids.append(call_id)
                blocks.insert(draw(st.integers(0, len(blocks))), draw(tool_call_block(call_id)))
        message = common_pb2.ConversationMessage(role=role, content=blocks)
    message.id = draw(st.one_of(st.just(""), ids.filter(lambda i: not i.startswith("ce-injected-"))))
    stamp = draw(timestamps)
    if stamp is not None:
        message.timestamp.CopyFrom(stamp)
    host_fields = draw(st.one_of(st.just(""), json_texts(object_only=True)))
    if "contextengine_injected" not in host_fields:
        message.host_fields.json = host_fields
    return message


@st.composite
def transcripts(draw: st.DrawFn, *, min_size: int, max_size: int) -> list[common_pb2.ConversationMessage]:
    call_ids: list[str] = []
    size = draw(st.integers(min_size, max_size))
    return [draw(host_message(call_ids)) for _ in range(size)]
