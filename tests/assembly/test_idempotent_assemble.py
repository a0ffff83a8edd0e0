"""Assemble is idempotent on its own output (issue 30): what the engine injected into one answer
and the host hands back in its next call is replaced by that call's injection, never kept
beside it, however the host reshaped it (marks stripped, tool-call ids renamed `…2`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from itertools import islice

import pytest
from contextengine.v1 import assembly_pb2, common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.injection import (
    AUTO_RECALL_TOOL,
    MemoryForInjection,
    injected_recall_pair,
    summary_message,
)
from shared.domain.host_messages import (
    HostMessageCache,
    HostTranscript,
    host_transcript,
    newest_first,
    newest_own_messages,
    own_host_transcript,
    without_engine_injections,
)
from shared.errors import InvalidArgument
from shared.openviking import DevAuth, OpenVikingClient
from tests.assembly.conftest import assembly_stub
from tests.assembly.helpers import assistant, tool_result, unique_tenant, user
from tests.assembly.test_host_messages import transcripts, wires_of
from tests.assembly.test_servicer import RECALL_SETTINGS, identity_of, seed_user
from tests.support.stack import OpenVikingEndpoint

Message = common_pb2.ConversationMessage
MEMORY = MemoryForInjection("viking://user/memories/preferences/editor.md", "preferences", "vim", 0.9)


def reshaped(message: Message, *, strip_marks: bool, rename: str, drop_name: bool, blank: bool) -> Message:
    """`message` as a host may hand it back: without id and host_fields, its tool-call id
    renamed, the result's tool name dropped, an empty text block added."""
    out = Message()
    out.CopyFrom(message)
    if strip_marks:
        out.id = ""
        out.ClearField("host_fields")
    for block in out.content:
        if block.HasField("tool_call"):
            block.tool_call.id += rename
        if block.HasField("tool_result"):
            block.tool_result.tool_call_id += rename
            if drop_name:
                block.tool_result.tool_name = ""
    if blank and out.role == common_pb2.MESSAGE_ROLE_ASSISTANT:
        out.content.insert(0, common_pb2.ContentBlock(text=common_pb2.TextBlock(text="")))
    return out


HOST_RESHAPES = st.fixed_dictionaries(
    {
        "strip_marks": st.booleans(),
        "rename": st.sampled_from(["", "2", "_2"]),
        "drop_name": st.booleans(),
        "blank": st.booleans(),
    }
)


@given(transcripts(), HOST_RESHAPES, st.integers(0, 20), st.booleans())
def test_injections_are_dropped_and_host_messages_kept_whatever_the_reshape(
    host: list[Message], reshape: dict[str, object], where: int, with_summary: bool
) -> None:
    call, result = injected_recall_pair("which editor", [MEMORY], "abcdefghi")
    injected = [call, result] + ([summary_message(["we agreed on X"])] if with_summary else [])
    at = min(where, len(host))
    handed_back = host[:at] + [reshaped(m, **reshape) for m in injected] + host[at:]  # type: ignore[arg-type]
    assert without_engine_injections(wires_of(handed_back)) == wires_of(host)


@given(transcripts(), HOST_RESHAPES, st.lists(st.integers(0, 20), max_size=4), st.integers(0, 12))
def test_the_newest_own_messages_come_from_the_tail_as_from_the_whole(
    host: list[Message], reshape: dict[str, object], wheres: list[int], count: int
) -> None:
    """The recall intent's messages, read from the transcript's tail before the whole is scanned,
    are the ones the whole transcript less its injections ends with, wherever injections sit."""
    handed_back = list(host)
    for n, where in enumerate(sorted(wheres, reverse=True)):
        call, result = injected_recall_pair(f"question {n}", [MEMORY], f"call{n}abcdefgh")
        at = min(where, len(handed_back))
        handed_back[at:at] = [reshaped(m, **reshape) for m in (call, result)]  # type: ignore[arg-type]
    wires, cache = wires_of(handed_back), HostMessageCache()
    whole = list(islice(newest_first(without_engine_injections(wires), cache), count))
    assert newest_own_messages(wires, cache, count) == whole == host[::-1][:count]


def test_a_recall_result_after_another_pair_is_judged_by_its_call_not_by_the_tail() -> None:
    """Two recall pairs handed back nested (call, call, result, result), the results stripped of
    their tool names: the newest is known as an injection only by its call, three messages back."""
    host = [user("alpha"), assistant("beta")]
    outer = injected_recall_pair("first", [MEMORY], "call0abcdefgh")
    inner = injected_recall_pair("second", [MEMORY], "call1abcdefgh")
    stripped = {"strip_marks": True, "rename": "", "drop_name": True, "blank": False}
    nested = [outer[0], inner[0], inner[1], outer[1]]
    wires = wires_of(host + [reshaped(m, **stripped) for m in nested])  # type: ignore[arg-type]
    assert newest_own_messages(wires, HostMessageCache(), 1) == [host[-1]]


def _transcript_or_none(make: Callable[[], HostTranscript]) -> list[Message] | None:
    try:
        return make().messages
    except InvalidArgument:
        return None


CALLS = st.lists(
    st.tuples(
        transcripts(),
        st.one_of(st.just(1_000), st.integers(0, 30)),
        st.lists(st.integers(0, 30), max_size=2),
        st.booleans(),
    ),
    min_size=1,
    max_size=4,
)


@given(CALLS, HOST_RESHAPES)
def test_a_streams_transcript_is_its_own_messages_call_after_call(
    calls: list[tuple[list[Message], int, list[int], bool]], reshape: dict[str, object]
) -> None:
    """Call after call on one stream (the host keeping some of its earlier messages and adding
    others, injections handed back anywhere or not at all, the model calling the recall tool
    itself and its result coming in the next call without the tool's name), the transcript that
    scans only what a trace-free previous call did not begin with is the whole transcript less
    its injections."""
    cache, host, answer = HostMessageCache(), [], []
    for n, (added, kept, wheres, model_recalls) in enumerate(calls):
        host = host[:kept] + answer + added
        answer = [tool_result(f"own{n}", '{"memories": []}', name="")] if model_recalls else []
        host += [assistant("let me look", [(f"own{n}", AUTO_RECALL_TOOL)])] if model_recalls else []
        handed_back = list(host)
        for where in sorted(wheres, reverse=True):
            pair = injected_recall_pair(f"question {n}", [MEMORY], f"call{n}{where}abcdefgh")
            handed_back[min(where, len(handed_back)) : min(where, len(handed_back))] = [
                reshaped(m, **reshape)  # type: ignore[arg-type]
                for m in pair
            ]
        wires = wires_of(handed_back)
        whole = _transcript_or_none(
            lambda: host_transcript(without_engine_injections(wires), HostMessageCache(), "s1")  # noqa: B023
        )
        assert _transcript_or_none(lambda: own_host_transcript(wires, cache, "s1")) == whole  # noqa: B023


def test_a_host_message_that_mentions_the_markers_is_kept() -> None:
    host = [
        user("what do [Session History Summary] and memory_recall_auto mean?"),
        assistant("", [("c1", "memory_recall")]),
        tool_result("c1", '{"memories": []}', name="memory_recall"),
        assistant("ce-injected- and contextengine_injected are its marks"),
    ]
    assert without_engine_injections(wires_of(host)) == wires_of(host)


@pytest.fixture
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield client


def _recall_calls(messages: list[Message]) -> list[str]:
    return [
        b.tool_call.id
        for m in messages
        for b in m.content
        if b.HasField("tool_call") and b.tool_call.name == AUTO_RECALL_TOOL
    ]


def _own(messages: list[Message]) -> list[Message]:
    return [m for m in messages if "contextengine_injected" not in m.host_fields.json]


@pytest.mark.stack
@pytest.mark.parametrize("strip_marks", [False, True])
async def test_assemble_of_its_own_output_has_one_recall_pair(
    ov: OpenVikingClient, strip_marks: bool
) -> None:
    tenant = unique_tenant("idem")
    await seed_user(ov, tenant)
    host = [
        user("what is the capital of france"),
        assistant("Paris."),
        user("which text editor do I prefer for coding"),
    ]
    request = assembly_pb2.AssembleRequest(
        identity=identity_of(tenant), messages=host, prompt="which text editor do I prefer for coding"
    )
    async with assembly_stub(RECALL_SETTINGS, ov) as stub:
        first = await stub.Assemble(request)
        assert len(_recall_calls(list(first.messages))) == 1, first.messages
        # what OpenClaw does: the first answer, reshaped, is the second call's input
        again = [
            reshaped(m, strip_marks=strip_marks, rename="2", drop_name=strip_marks, blank=False)
            if "contextengine_injected" in m.host_fields.json
            else m
            for m in first.messages
        ]
        request.ClearField("messages")
        request.messages.extend(again)
        second = await stub.Assemble(request)
    calls = _recall_calls(list(second.messages))
    assert len(calls) == 1 and calls == _recall_calls(list(first.messages)), second.messages
    results = [m for m in second.messages if any(b.tool_result.tool_call_id == calls[0] for b in m.content)]
    assert len(results) == 1
    assert json.loads(results[0].content[0].tool_result.content[0].text.text)["memories"]
    assert _own(list(second.messages)) == _own(list(first.messages)) == host
