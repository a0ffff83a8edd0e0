from __future__ import annotations

import json
import re

from contextengine.v1 import common_pb2

from services.assembly.injection import (
    MemoryForInjection,
    injected_recall_pair,
    is_engine_injected,
    recall_tool_result_json,
    summary_message,
    tool_call_id_for,
)
from shared.domain.messages import validate_messages
from shared.domain.recall_handles import session_digest
from tests.assembly.helpers import user


def test_tool_call_id_shape_and_determinism() -> None:
    ids = {tool_call_id_for("acme", "alice", "stream", f"q{i}") for i in range(500)}
    assert len(ids) == 500
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)
    assert tool_call_id_for("a", "b") == tool_call_id_for("a", "b") != tool_call_id_for("a", "c")


def test_injected_pair_shape() -> None:
    memories = [MemoryForInjection("viking://user/alice/memories/p/x.md", "p", "likes tea", 0.81234)]
    call, result = injected_recall_pair("tea?", memories, "abcDEF123")
    assert call.role == common_pb2.MESSAGE_ROLE_ASSISTANT and len(call.content) == 1
    block = call.content[0].tool_call
    assert (block.id, block.name, json.loads(block.arguments.json)) == (
        "abcDEF123",
        "memory_recall_auto",
        {"query": "tea?"},
    )
    assert result.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT and len(result.content) == 1
    tr = result.content[0].tool_result
    assert (tr.tool_call_id, tr.tool_name, len(tr.content)) == ("abcDEF123", "memory_recall_auto", 1)
    assert json.loads(tr.content[0].text.text) == {
        "memories": ["p: likes tea ref=viking://~/memories/p/x.md"],
        "source": "openviking-auto-recall",
    }
    # A recalled raw exchange says when it was said, and the handle memory_expand takes.
    turn = MemoryForInjection(
        "viking://~/memories/ce-turns/s/0000001.md",
        "conversation",
        "user: hi",
        0.5,
        "turn",
        "2025-01-02 10:00",
    )
    _, turn_result = injected_recall_pair("tea?", [turn], "abcDEF123")
    shown = json.loads(turn_result.content[0].tool_result.content[0].text.text)["memories"][0]
    assert shown == f"2025-01-02 user: hi ref=t{session_digest('s')}.1"
    for message in (call, result):
        assert message.id.startswith("ce-injected-")
        assert json.loads(message.host_fields.json) == {"contextengine_injected": "memory_recall_auto"}
        assert is_engine_injected(message)
    validate_messages([user("q"), call, result])


def test_summary_message_and_marker_detection() -> None:
    message = summary_message(["first", "", "second"])
    assert message.content[0].text.text == "[Session History Summary]\nfirst\n\nsecond"
    assert message.role == common_pb2.MESSAGE_ROLE_USER and is_engine_injected(message)
    plain = user("x")
    assert not is_engine_injected(plain)
    plain.host_fields.json = '{"contextengine_injected": "x"}'
    assert is_engine_injected(plain)


def test_explicit_source() -> None:
    assert json.loads(recall_tool_result_json([], "openviking-recall")) == {
        "memories": [],
        "source": "openviking-recall",
    }
