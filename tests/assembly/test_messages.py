from __future__ import annotations

import pytest
from contextengine.v1 import common_pb2

from shared.domain.messages import message_texts, validate_messages
from shared.errors import InvalidArgument
from tests.assembly.helpers import assistant, text_block, tool_result, user


def _field(messages: list[common_pb2.ConversationMessage]) -> str:
    with pytest.raises(InvalidArgument) as caught:
        validate_messages(messages)
    return caught.value.field


def test_valid_transcript_passes() -> None:
    validate_messages(
        [user("hi"), assistant("ok", [("c1", "ls")]), tool_result("c1", "files"), assistant("done")]
    )


def test_unspecified_role_is_named() -> None:
    assert (
        _field([user("a"), common_pb2.ConversationMessage(content=[text_block("x")])]) == "messages[1].role"
    )


def test_tool_result_without_call_id() -> None:
    bad = tool_result("", "x")
    assert _field([user("a"), bad]) == "messages[1].content[0].tool_result.tool_call_id"


def test_tool_result_must_match_an_earlier_call() -> None:
    assert _field([user("a"), tool_result("nope", "x")]) == "messages[1].content[0].tool_result.tool_call_id"
    # A call after the result does not count.
    assert _field([tool_result("c1", "x"), assistant("", [("c1", "t")])]) == (
        "messages[0].content[0].tool_result.tool_call_id"
    )


def test_tool_result_message_holds_exactly_one_result() -> None:
    msg = tool_result("c1", "x")
    msg.content.append(text_block("extra"))
    assert _field([assistant("", [("c1", "t")]), msg]) == "messages[1].content"


def test_tool_call_outside_assistant_and_bad_json() -> None:
    msg = assistant("", [("c1", "t")])
    msg.role = common_pb2.MESSAGE_ROLE_USER
    assert _field([msg]) == "messages[0].content[0]"
    bad = assistant("", [("c1", "t")])
    bad.content[0].tool_call.arguments.json = "{nope"
    assert _field([bad]) == "messages[0].content[0].tool_call.arguments.json"


def test_empty_block_host_fields_and_size() -> None:
    assert _field(
        [
            common_pb2.ConversationMessage(
                role=common_pb2.MESSAGE_ROLE_USER, content=[common_pb2.ContentBlock()]
            )
        ]
    ) == ("messages[0].content[0]")
    msg = user("x")
    msg.host_fields.json = "[1]"
    assert _field([msg]) == "messages[0].host_fields.json"
    assert _field([user("x" * 2_000_001)]) == "messages[0].content[0].text.text"


def test_custom_field_prefix() -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_messages([common_pb2.ConversationMessage()], field="batch.messages")
    assert caught.value.field == "batch.messages[0].role"


def test_message_texts_cover_every_part() -> None:
    msg = assistant("hello", [("c1", "search")])
    assert message_texts(msg) == ["hello", "search", '{"x": 1}']
    assert message_texts(tool_result("c1", "found", name="search")) == ["search", "found"]
