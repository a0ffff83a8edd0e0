"""`AssembleRequest` as it arrives, with each host message still in its wire bytes
(`shared.runtime.request_wire`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from contextengine.v1 import assembly_pb2, common_pb2

from shared.runtime.request_wire import wire_type


class AssembleWire(Protocol):
    """The fields of `AssembleRequest`, its `messages` as wire bytes."""

    identity: common_pb2.Identity
    messages: Sequence[bytes]
    token_budget: int
    model: str
    prompt: str


_WIRE = wire_type(assembly_pb2.AssembleRequest)


def parse_assemble_wire(data: bytes) -> AssembleWire:
    """The gRPC request deserializer of Assemble."""
    return cast(AssembleWire, _WIRE.FromString(data))


def as_wire(request: assembly_pb2.AssembleRequest) -> AssembleWire:
    """An already decoded request (an in-process caller's) in the same form."""
    return parse_assemble_wire(request.SerializeToString())
