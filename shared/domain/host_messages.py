"""The host's transcript of one Assemble or AfterTurn: each distinct message decoded and
validated once, and a stream's transcript taken up where its previous call left it.

A host resends its whole transcript on every call (1,500 messages at 500 turns). Each message
arrives as its own wire bytes (`shared.runtime.request_wire`):

- a replica keeps the decoded message and its validated shape by the content key of its bytes,
  so a call decodes and validates only messages it has not seen before, and checks the place of
  the others (a tool result must follow its call);
- per stream, it keeps the previous call's transcript (wire bytes, messages, shapes, turns): the
  messages this call begins with in common with it are taken as they were, only the rest are
  looked at.

The same decoded message objects come back call after call, so what is derived from them later
(token counts, envelopes) is found by identity.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, islice

from contextengine.v1 import common_pb2
from google.protobuf.message import DecodeError

from shared.domain.engine_injections import (
    AUTO_RECALL_TOOL,
    INJECTED_ID_PREFIX,
    INJECTED_MARKER_KEY,
    SUMMARY_HEADER,
    is_injected_message,
    recall_call_ids,
)
from shared.domain.messages import MessageKeys, MessageShape, TranscriptCheck, check_message_count
from shared.domain.turns import Turn, extend_turns
from shared.errors import InvalidArgument
from shared.sized_cache import MessageKey, SizedCache

HOST_MESSAGE_BYTES = 32 * 1024 * 1024
"""Wire bytes of the decoded messages a replica keeps (they take ~2-3x that in memory)."""
STREAM_TRANSCRIPT_BYTES = 32 * 1024 * 1024
"""Wire bytes of the streams' last transcripts a replica keeps (50 streams of 500 turns), with
their decoded messages (mostly those of the message cache). Both bounds together keep an
assembly replica well inside its container's 768 MiB limit (k8s/base/assembly.yaml); capture,
with 512 MiB, keeps half of each (`services.capture.servicer`)."""


@dataclass(frozen=True, slots=True)
class HostMessage:
    message: common_pb2.ConversationMessage
    shape: MessageShape


@dataclass(frozen=True)
class HostTranscript:
    messages: list[common_pb2.ConversationMessage]
    shapes: list[MessageShape]
    turns: list[Turn]
    keys: MessageKeys


@dataclass(frozen=True)
class _StreamTranscript:
    wires: list[bytes]
    transcript: HostTranscript
    calls: frozenset[str]
    """Every tool call id in the transcript."""
    trace_free: bool = False
    """No message holds a trace of an engine injection (`own_host_transcript`)."""


class HostMessageCache:
    """Decoded, validated host messages by content key; each stream's last transcript."""

    def __init__(
        self, message_bytes: int = HOST_MESSAGE_BYTES, stream_bytes: int = STREAM_TRANSCRIPT_BYTES
    ) -> None:
        self.messages: SizedCache[MessageKey, HostMessage] = SizedCache(message_bytes)
        self.streams: SizedCache[str, _StreamTranscript] = SizedCache(stream_bytes)


def _decode(wire: bytes, field: str) -> common_pb2.ConversationMessage:
    try:
        return common_pb2.ConversationMessage.FromString(wire)
    except DecodeError as exc:
        raise InvalidArgument(field, "is not a valid ConversationMessage encoding") from exc


def _common_prefix(wires: list[bytes], previous: list[bytes]) -> int:
    """How many messages the two lists begin with in common (binary search over list compares,
    which compare bytes in C)."""
    low, high = 0, min(len(wires), len(previous))
    for common in (high, high - 1):  # usual: the previous call's messages, or all but its last
        if common > 0 and wires[:common] == previous[:common]:
            return common
    while low < high:
        middle = (low + high + 1) // 2
        if wires[:middle] == previous[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass
class _Start:
    """Where this call's transcript starts from: what the stream's previous call had in common."""

    check: TranscriptCheck
    messages: list[common_pb2.ConversationMessage]
    shapes: list[MessageShape]
    turns: list[Turn]
    whole_turns: bool
    """Whether `turns` is the split of all of `messages`."""
    keys: MessageKeys = field(default_factory=MessageKeys)


def _take_up(
    previous: _StreamTranscript | None, wires: list[bytes], field: str, common: int | None
) -> _Start:
    if common is None:
        common = _common_prefix(wires, previous.wires) if previous is not None else 0
    reused = common
    if previous is None or not reused:
        return _Start(TranscriptCheck(field), [], [], [], whole_turns=True)
    last = previous.transcript
    messages, shapes = last.messages[:reused], last.shapes[:reused]
    if reused == len(previous.wires):
        check = TranscriptCheck(field, previous.calls)
        return _Start(check, messages, shapes, last.turns, whole_turns=True, keys=last.keys)
    # The previous call's last messages differ: its turns that ended before them stay.
    calls = frozenset(call_id for shape in shapes for call_id in shape.call_ids)
    turns = [t for t in last.turns if t.start + len(t.messages) <= reused]
    return _Start(TranscriptCheck(field, calls), messages, shapes, turns, whole_turns=False, keys=last.keys)


def host_transcript(
    wires: Sequence[bytes],
    cache: HostMessageCache,
    stream: str,
    field: str = "messages",
    *,
    trace_free: bool = False,
    common: int | None = None,
) -> HostTranscript:
    """The transcript's messages, shapes and turns; raise `InvalidArgument` naming the first bad
    field. `stream` names whose transcript this is (its previous call's may be taken up);
    `trace_free`: no message of `wires` holds a trace of an injection; `common`: how many
    messages `wires` begins with in common with the stream's previous transcript, when known."""
    check_message_count(len(wires), field)
    sent = list(wires)
    start = _take_up(cache.streams.get(stream), sent, field, common)
    check, messages, shapes = start.check, start.messages, start.shapes
    reused = len(messages)
    for index in range(reused, len(sent)):
        wire = sent[index]
        key = (hash(wire), len(wire))
        known = cache.messages.get(key)
        if known is None:
            message = _decode(wire, f"{field}[{index}]")
            known = HostMessage(message, check.new(index, message, key))
            cache.messages.put(key, known, weight=len(wire))
        else:
            check.known(index, known.shape)
        messages.append(known.message)
        shapes.append(known.shape)
    turns = start.turns
    if len(messages) > reused or not start.whole_turns:
        turns = extend_turns(turns, messages, shapes)
    keys = start.keys.extended(messages, shapes, reused)
    transcript = HostTranscript(messages, shapes, turns, keys)
    weight = sum(map(len, sent))
    cache.streams.put(
        stream, _StreamTranscript(sent, transcript, frozenset(check.calls), trace_free), weight=weight
    )
    return transcript


def own_host_transcript(
    wires: Sequence[bytes], cache: HostMessageCache, stream: str, field: str = "messages"
) -> HostTranscript:
    """`host_transcript` of `without_engine_injections(wires)`, scanning for injections only the
    messages after those the stream's previous transcript began with when none of its messages
    held a trace of one (a host resends the same messages and adds a few: the scan of thousands
    would run on the cores OpenViking needs for the call's `find`)."""
    sent = list(wires)
    previous = cache.streams.get(stream)
    clean = _common_prefix(sent, previous.wires) if previous is not None and previous.trace_free else None
    if _holding(sent[clean or 0 :], _INJECTION_TRACES):
        return host_transcript(without_engine_injections(sent), cache, stream, field)
    return host_transcript(sent, cache, stream, field, trace_free=True, common=clean)


_INJECTION_TRACES = tuple(
    t.encode() for t in (INJECTED_ID_PREFIX, INJECTED_MARKER_KEY, AUTO_RECALL_TOOL, SUMMARY_HEADER)
)
"""Bytes one of which every engine-injected message's encoding contains, except a recall result
the host stripped of its tool name (found by its call id instead)."""


def without_engine_injections(wires: Sequence[bytes]) -> list[bytes]:
    """The host's messages without those the engine injected into an earlier call's answer (an
    Assemble's own output handed back to it): this call injects its own, never a second copy.

    Only messages whose bytes hold a trace of an injection are decoded. One that does not decode
    is kept, for `host_transcript` to name."""
    suspects = _decoded(wires, _holding(wires, _INJECTION_TRACES))
    if not suspects:
        return list(wires)
    recall_ids = recall_call_ids(suspects.values())
    by_call_id = _holding(wires, [call_id.encode() for call_id in recall_ids])
    suspects |= _decoded(wires, by_call_id - suspects.keys())
    return [
        wire
        for index, wire in enumerate(wires)
        if index not in suspects or not is_injected_message(suspects[index], recall_ids)
    ]


def newest_own_messages(
    wires: Sequence[bytes], cache: HostMessageCache, count: int
) -> list[common_pb2.ConversationMessage]:
    """The `count` newest host messages, newest first, less the engine's injections: the same as
    the first `count` of `newest_first(without_engine_injections(wires))`, from the transcript's
    tail alone (what decides the recall query need not wait for a scan of thousands of messages).

    An injection is found in its own bytes or, a recall result stripped of its tool name, by its
    call's: the tail judges every message as the whole transcript does except a tool result whose
    call is older than the tail. So the tail grows until it holds `count` messages of its own and
    the calls of those that are tool results."""
    tail = max(2 * count, 1)
    while True:
        window = wires[-tail:]
        newest = list(islice(newest_first(without_engine_injections(window), cache), count))
        whole_here = len(newest) == count and not _results_of_older_calls(newest, window, cache)
        if whole_here or tail >= len(wires):
            return newest
        tail *= 2


def _results_of_older_calls(
    messages: Sequence[common_pb2.ConversationMessage], window: Sequence[bytes], cache: HostMessageCache
) -> bool:
    """Whether one of `messages` is a tool result whose call is not among the `window`'s messages."""
    results = {b.tool_result.tool_call_id for m in messages for b in m.content if b.HasField("tool_result")}
    if not results:
        return False
    held = newest_first(window, cache)
    calls = {b.tool_call.id for m in held for b in m.content if b.HasField("tool_call")}
    return not results <= calls


def _holding(wires: Sequence[bytes], traces: Sequence[bytes]) -> set[int]:
    """Indices of the wires containing any of `traces`. The wires are searched joined, one
    `bytes.find` pass per trace (a transcript is thousands of messages, a trace rarely in one);
    the NUL between them, in no trace, keeps a match inside one wire."""
    if not traces:
        return set()
    joined = b"\0".join(wires)
    starts = list(accumulate((len(wire) + 1 for wire in wires), initial=0))
    found: set[int] = set()
    for trace in traces:
        at = joined.find(trace)
        while at != -1:
            index = bisect_right(starts, at) - 1
            found.add(index)
            at = joined.find(trace, starts[index + 1])
    return found


def _decoded(wires: Sequence[bytes], indices: set[int]) -> dict[int, common_pb2.ConversationMessage]:
    decoded: dict[int, common_pb2.ConversationMessage] = {}
    for index in sorted(indices):
        try:
            decoded[index] = common_pb2.ConversationMessage.FromString(wires[index])
        except DecodeError:
            continue
    return decoded


def newest_first(wires: Sequence[bytes], cache: HostMessageCache) -> Iterator[common_pb2.ConversationMessage]:
    """The host's messages from the newest, each decoded when reached (a message this replica
    has seen is taken as it was): what needs only the last few (the recall query) need not wait
    for the whole transcript. Nothing is validated here, and the reading stops at bytes that do
    not decode: `host_transcript` names the request's first bad field."""
    for wire in reversed(wires):
        known = cache.messages.get((hash(wire), len(wire)))
        if known is not None:
            yield known.message
            continue
        try:
            yield common_pb2.ConversationMessage.FromString(wire)
        except DecodeError:
            return
