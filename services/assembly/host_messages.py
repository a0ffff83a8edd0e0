"""The host's messages of one Assemble: decoded and validated once per distinct message.

A host resends its whole transcript on every call (1,500 messages at 500 turns). Each message
arrives as its own wire bytes (`services.assembly.request_wire`); a replica keeps the decoded
message and its validated shape by the bytes' content key, so a call decodes and validates only
the messages it has not seen before, and checks the place of the others (a tool result must
follow its call). The same decoded message objects come back call after call, so whatever is
derived from them later (token counts, envelopes) is found by identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.v1 import common_pb2
from google.protobuf.message import DecodeError

from shared.domain.messages import MessageShape, TranscriptCheck
from shared.errors import InvalidArgument
from shared.sized_cache import MessageKey, SizedCache

HOST_MESSAGE_BYTES = 64 * 1024 * 1024
"""Wire bytes of the decoded messages a replica keeps (they take ~2-3x that in memory)."""


@dataclass(frozen=True, slots=True)
class HostMessage:
    message: common_pb2.ConversationMessage
    shape: MessageShape


class HostMessageCache(SizedCache[MessageKey, HostMessage]):
    """Decoded, validated host messages by the content key of their wire bytes."""

    def __init__(self, capacity_bytes: int = HOST_MESSAGE_BYTES) -> None:
        super().__init__(capacity_bytes)


@dataclass(frozen=True)
class HostMessages:
    messages: list[common_pb2.ConversationMessage]
    shapes: list[MessageShape]


def _decode(wire: bytes, field: str) -> common_pb2.ConversationMessage:
    try:
        return common_pb2.ConversationMessage.FromString(wire)
    except DecodeError as exc:
        raise InvalidArgument(field, "is not a valid ConversationMessage encoding") from exc


def host_messages(wires: Sequence[bytes], cache: HostMessageCache, field: str = "messages") -> HostMessages:
    """The transcript's messages and shapes; raise `InvalidArgument` naming the first bad field."""
    check = TranscriptCheck(field)
    check.check_count(len(wires))
    messages: list[common_pb2.ConversationMessage] = []
    shapes: list[MessageShape] = []
    for index, wire in enumerate(wires):
        key = (hash(wire), len(wire))
        known = cache.get(key)
        if known is None:
            message = _decode(wire, f"{field}[{index}]")
            known = HostMessage(message, check.new(index, message, key))
            cache.put(key, known, weight=len(wire))
        else:
            check.known(index, known.shape)
        messages.append(known.message)
        shapes.append(known.shape)
    return HostMessages(messages, shapes)
