"""`AfterTurnRequest` as it arrives, with each host message still in its wire bytes
(`shared.runtime.request_wire`): a host resends its whole transcript on every AfterTurn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from contextengine.v1 import capture_pb2, common_pb2

from shared.runtime.request_wire import wire_type


class AfterTurnWire(Protocol):
    """The fields of `AfterTurnRequest`, its `messages` as wire bytes."""

    identity: common_pb2.Identity
    messages: Sequence[bytes]
    pre_prompt_message_count: int
    token_budget: int
    is_heartbeat: bool
    model: str


_WIRE = wire_type(capture_pb2.AfterTurnRequest)


def parse_after_turn_wire(data: bytes) -> AfterTurnWire:
    """The gRPC request deserializer of AfterTurn."""
    return cast(AfterTurnWire, _WIRE.FromString(data))


def as_wire(request: capture_pb2.AfterTurnRequest) -> AfterTurnWire:
    """An already decoded request (an in-process caller's) in the same form."""
    return parse_after_turn_wire(request.SerializeToString())
