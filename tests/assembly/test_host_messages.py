"""Host messages decoded from their wire bytes, once per distinct message (properties)."""

from __future__ import annotations

import pytest
from contextengine.v1 import assembly_pb2, common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.request_wire import ASSEMBLE_WIRE
from shared.domain.host_messages import HostMessageCache, host_transcript, newest_first
from shared.domain.messages import tool_call_ids, validate_messages
from shared.domain.turns import extend_turns, split_turns
from shared.errors import InvalidArgument
from shared.sized_cache import SizedCache
from tests.assembly.helpers import assistant, tool_result, user

WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "", "x" * 300])


@st.composite
def transcripts(draw: st.DrawFn) -> list[common_pb2.ConversationMessage]:
    """Valid transcripts: users, assistants making 0-2 calls, each call answered later, sometimes
    after a user message came in between (the call's turn and the next one become one)."""
    messages: list[common_pb2.ConversationMessage] = []
    for t in range(draw(st.integers(0, 6))):
        messages.append(user(draw(WORDS) or f"question {t}"))
        calls = [(f"c{t}-{c}", "tool") for c in range(draw(st.integers(0, 2)))]
        messages.append(assistant(draw(WORDS) or ("" if calls else "ok"), calls))
        if calls and draw(st.booleans()):
            messages.append(user(f"meanwhile {t}"))
        messages.extend(tool_result(call_id, draw(WORDS)) for call_id, _ in calls)
    return messages


def wires_of(messages: list[common_pb2.ConversationMessage]) -> list[bytes]:
    return list(ASSEMBLE_WIRE.of(assembly_pb2.AssembleRequest(messages=messages)).messages)


@given(transcripts())
def test_decoded_messages_and_shapes_match_full_validation(
    messages: list[common_pb2.ConversationMessage],
) -> None:
    cache = HostMessageCache()
    first = host_transcript(wires_of(messages), cache, "s1")
    expected = validate_messages(messages)
    assert first.messages == messages
    assert [(s.role, s.call_ids, s.answers) for s in first.shapes] == [
        (s.role, s.call_ids, s.answers) for s in expected
    ]
    assert first.turns == split_turns(messages)
    for stream in ("s1", "s2"):  # taken up from the stream's last call; from the message cache
        again = host_transcript(wires_of(messages), cache, stream)
        assert all(a is b for a, b in zip(again.messages, first.messages, strict=True))
        assert again.shapes == first.shapes and again.turns == first.turns


@given(
    transcripts().filter(lambda m: any(x.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT for x in m)),
    st.booleans(),
)
def test_a_known_tool_result_out_of_place_is_named(
    messages: list[common_pb2.ConversationMessage], warm: bool
) -> None:
    """A tool result seen valid in one transcript is still refused where its call is missing."""
    cache = HostMessageCache()
    if warm:
        host_transcript(wires_of(messages), cache, "s1")
    first = next(i for i, m in enumerate(messages) if m.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT)
    answered = messages[first].content[0].tool_result.tool_call_id
    caller = next(i for i, m in enumerate(messages) if answered in tool_call_ids(m))
    without_call = [m for i, m in enumerate(messages) if i != caller]
    moved = without_call.index(messages[first])
    with pytest.raises(InvalidArgument) as caught:
        host_transcript(wires_of(without_call), cache, "s1")
    assert caught.value.field == f"messages[{moved}].content[0].tool_result.tool_call_id"


@given(transcripts(), st.data())
def test_bytes_that_are_no_message_are_named(
    messages: list[common_pb2.ConversationMessage], data: st.DataObject
) -> None:
    wires = wires_of(messages)
    at = data.draw(st.integers(0, len(wires)))
    wires.insert(at, b"\xff\xff\xff")
    with pytest.raises(InvalidArgument) as caught:
        host_transcript(wires, HostMessageCache(), "s1")
    assert caught.value.field == f"messages[{at}]"


@given(transcripts(), st.data(), st.booleans())
def test_newest_first_reads_the_transcript_backwards_up_to_bytes_that_are_no_message(
    messages: list[common_pb2.ConversationMessage], data: st.DataObject, seen_before: bool
) -> None:
    """What the recall query reads before the transcript is taken up: the same messages, newest
    first, whether this replica decoded them before or not; nothing past undecodable bytes."""
    cache = HostMessageCache()
    if seen_before:
        host_transcript(wires_of(messages), cache, "s1")
    assert list(newest_first(wires_of(messages), cache)) == messages[::-1]
    wires = wires_of(messages)
    at = data.draw(st.integers(0, len(wires)))
    wires.insert(at, b"\xff\xff\xff")
    assert list(newest_first(wires, cache)) == messages[at:][::-1]


@given(transcripts(), transcripts(), st.data())
def test_a_stream_taken_up_where_it_left_off_is_the_whole_transcript(
    start: list[common_pb2.ConversationMessage],
    more: list[common_pb2.ConversationMessage],
    data: st.DataObject,
) -> None:
    """Whatever came before (a prefix, a different transcript, nothing), the transcript and its
    turns are those of the messages sent now."""
    renamed = [
        common_pb2.ConversationMessage(id=f"later-{i}", role=m.role, content=m.content)
        for i, m in enumerate(more)
    ]
    before = start[: data.draw(st.integers(0, len(start)))]
    branch = start[: data.draw(st.integers(0, len(before)))]  # the previous call's end replaced
    now = data.draw(st.sampled_from([[*start, *renamed], start, [*branch, *renamed], renamed, []]))
    cache = HostMessageCache()
    host_transcript(wires_of(before), cache, "s1")
    taken_up = host_transcript(wires_of(now), cache, "s1")
    assert taken_up.messages == now and taken_up.turns == split_turns(now)
    assert [taken_up.keys(m) for m in taken_up.messages] == [s.key for s in taken_up.shapes]
    assert [s.answers for s in taken_up.shapes] == [s.answers for s in validate_messages(now)]


@given(transcripts(), st.data())
def test_extending_the_turns_of_a_prefix_splits_as_a_whole(
    messages: list[common_pb2.ConversationMessage], data: st.DataObject
) -> None:
    shapes = validate_messages(messages)
    cut = data.draw(st.integers(0, len(messages)))
    prefix = split_turns(messages[:cut], shapes[:cut])
    assert extend_turns(prefix, messages, shapes) == split_turns(messages, shapes)


@given(st.integers(1, 50), st.lists(st.tuples(st.integers(0, 9), st.integers(1, 60)), max_size=40))
def test_weighted_cache_stays_within_its_capacity(capacity: int, puts: list[tuple[int, int]]) -> None:
    cache: SizedCache[int, int] = SizedCache(capacity)
    weights: dict[int, int] = {}
    for key, weight in puts:
        cache.put(key, weight, weight=weight)
        weights[key] = weight
        kept = [k for k in weights if cache.get(k) is not None]
        assert sum(weights[k] for k in kept) <= capacity
        assert (cache.get(key) == weight) == (weight <= capacity)
