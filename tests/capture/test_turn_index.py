"""The turn index documents: one per exchange, dated, every message's text, URIs that parse back."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from contextengine.v1 import common_pb2
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.turn_index import (
    IndexedMessage,
    document_date,
    document_texts,
    parse_turn_uri,
    turn_documents,
    turn_uri,
)

CAPTURED = datetime(2026, 5, 6, 7, 8, tzinfo=UTC)
Role = common_pb2.MessageRole


def text(role: int, body: str, when: datetime | None = None) -> common_pb2.ConversationMessage:
    message = common_pb2.ConversationMessage(
        role=role, content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=body))]
    )
    if when is not None:
        stamp = Timestamp()
        stamp.FromDatetime(when)
        message.timestamp.CopyFrom(stamp)
    return message


def tool_exchange() -> list[common_pb2.ConversationMessage]:
    call = common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_ASSISTANT,
        content=[
            common_pb2.ContentBlock(
                tool_call=common_pb2.ToolCallBlock(
                    id="c1",
                    name="read_file",
                    arguments=common_pb2.JsonValue(json=json.dumps({"path": "db.yaml"})),
                )
            )
        ],
    )
    result = common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_TOOL_RESULT,
        content=[
            common_pb2.ContentBlock(
                tool_result=common_pb2.ToolResultBlock(
                    tool_call_id="c1",
                    tool_name="read_file",
                    content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text="pool_size: 5"))],
                )
            )
        ],
    )
    return [call, result]


def test_one_dated_document_per_exchange_with_tool_calls_and_outputs() -> None:
    said = datetime(2026, 3, 4, 14, 5, tzinfo=UTC)
    messages = [
        text(Role.MESSAGE_ROLE_USER, "Check the pool settings", said),
        *tool_exchange(),
        text(Role.MESSAGE_ROLE_ASSISTANT, "The pool is small."),
        text(Role.MESSAGE_ROLE_USER, "Thanks"),
    ]
    documents = turn_documents(
        "ce-s-g0000", [IndexedMessage(10 + i, m) for i, m in enumerate(messages)], CAPTURED
    )
    assert [d.uri for d in documents] == [turn_uri("ce-s-g0000", 10), turn_uri("ce-s-g0000", 14)]
    first = documents[0].content
    assert document_date(first) == "2026-03-04 14:05"
    assert document_texts(first) == [
        "Check the pool settings",
        '[calls read_file({"path": "db.yaml"})]',
        "[read_file returned] pool_size: 5",
        "The pool is small.",
    ]
    assert document_date(documents[1].content) == "2026-05-06 07:08"  # no host timestamp: capture time


@given(session=st.from_regex(r"[A-Za-z0-9_.-]{1,40}", fullmatch=True), sequence=st.integers(0, 9_999_999))
def test_turn_uris_parse_back(session: str, sequence: int) -> None:
    ref = parse_turn_uri(turn_uri(session, sequence))
    assert ref is not None and (ref.session_id, ref.first_sequence, ref.user_id) == (session, sequence, None)
    canonical = turn_uri(session, sequence).replace("viking://~", "viking://user/alice")
    assert parse_turn_uri(canonical) == type(ref)("alice", session, sequence)


@given(st.lists(st.tuples(st.sampled_from([Role.MESSAGE_ROLE_USER, Role.MESSAGE_ROLE_ASSISTANT]),
                          st.text(min_size=1, max_size=80).filter(str.strip)), max_size=12))  # fmt: skip
def test_every_message_with_text_is_in_exactly_one_document(messages: list[tuple[int, str]]) -> None:
    indexed = [IndexedMessage(i, text(role, body)) for i, (role, body) in enumerate(messages)]
    documents = turn_documents("s", indexed, CAPTURED)
    lines = [t for d in documents for t in document_texts(d.content)]
    assert lines == [" ".join(body.split()) for _, body in messages]
    assert len({d.uri for d in documents}) == len(documents)
