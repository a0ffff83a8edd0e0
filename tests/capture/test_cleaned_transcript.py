"""Cleaning a transcript from where it is needed gives what cleaning all of it gives (property)."""

from __future__ import annotations

import json

from contextengine.v1 import common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.capture.injections import (
    CleanedTranscript,
    auto_recall_call_ids,
    auto_recall_call_ids_of,
    clean_transcript,
)
from shared.domain.messages import validate_messages
from tests.capture.messages import assistant, injected_recall, tool_call, tool_result, user


def recall(call_id: str, marked: bool) -> list[common_pb2.ConversationMessage]:
    """An injected recall pair naming its own URI; unmarked, only its tool name gives it away."""
    call, result = injected_recall(call_id)
    payload = {"memories": [{"uri": f"viking://~/memories/notes/{call_id}.md", "content": "x"}]}
    result.content[0].tool_result.content[0].text.text = json.dumps(payload)
    if not marked:
        for message in (call, result):
            message.id = ""
            message.ClearField("host_fields")
    return [call, result]


@st.composite
def transcripts(draw: st.DrawFn) -> list[common_pb2.ConversationMessage]:
    messages: list[common_pb2.ConversationMessage] = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "tool", "recall", "bare-recall", "relevant"]))
        if kind == "user":
            messages.append(user(f"question {i}"))
        elif kind == "assistant":
            messages.append(assistant(f"answer {i}"))
        elif kind == "tool":
            messages += [tool_call(f"t{i}", "ls", "{}"), tool_result(f"t{i}", "ls", "a b")]
        elif kind in ("recall", "bare-recall"):
            messages += recall(f"r{i}", marked=kind == "recall")
        else:
            messages.append(user(f"<relevant-memories>- old {i}</relevant-memories>\nquestion {i}"))
    return messages


@given(transcripts(), st.lists(st.integers(0, 40), max_size=4), st.integers(0, 40))
def test_cleaning_from_where_it_is_needed_equals_cleaning_everything(
    messages: list[common_pb2.ConversationMessage], asked: list[int], tail_from: int
) -> None:
    """The recall call ids come from the validated shapes (AfterTurn's wire path)."""
    whole = clean_transcript(messages)
    lazy = CleanedTranscript(messages, validate_messages(messages))
    for index in [i for i in asked if i < len(messages)]:
        assert lazy[index] == whole[index]
    assert lazy.tail(tail_from) == whole[tail_from:]
    assert [lazy[i] for i in range(len(messages))] == whole


@given(transcripts())
def test_recall_call_ids_from_shapes_equal_those_from_messages(
    messages: list[common_pb2.ConversationMessage],
) -> None:
    assert auto_recall_call_ids_of(validate_messages(messages)) == auto_recall_call_ids(messages)
