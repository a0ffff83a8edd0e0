"""`AssembleRequest` as it arrives, with each host message still in its wire bytes.

Hosts resend their whole transcript on every Assemble. Decoding the messages as bytes (the wire
format of a sub-message is a length-delimited bytes field) lets the engine recognise messages it
has seen before by their bytes alone, and decode, validate and count only the new ones
(`services.assembly.host_messages`). The wire type is derived from `AssembleRequest`'s own
descriptor, so it follows the contract's field numbers; only `messages` changes type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from contextengine.v1 import assembly_pb2, common_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

WIRE_PACKAGE = "contextengine.v1.wire"


class AssembleWire(Protocol):
    """The fields of `AssembleRequest`, its `messages` as wire bytes."""

    identity: common_pb2.Identity
    messages: Sequence[bytes]
    token_budget: int
    model: str
    prompt: str


def _wire_class() -> type[Message]:
    message = descriptor_pb2.DescriptorProto()
    assembly_pb2.AssembleRequest.DESCRIPTOR.CopyToProto(message)
    message.name = "AssembleRequestWire"
    messages = next(f for f in message.field if f.name == "messages")
    messages.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    messages.ClearField("type_name")
    source = assembly_pb2.DESCRIPTOR
    wire_file = descriptor_pb2.FileDescriptorProto(
        name=f"{WIRE_PACKAGE.replace('.', '/')}/assembly_wire.proto",
        package=WIRE_PACKAGE,
        syntax="proto3",
        dependency=[d.name for d in source.dependencies],
        message_type=[message],
    )
    pool = descriptor_pool.Default()
    pool.AddSerializedFile(wire_file.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{WIRE_PACKAGE}.{message.name}"))


_WIRE = _wire_class()


def parse_assemble_wire(data: bytes) -> AssembleWire:
    """The gRPC request deserializer of Assemble."""
    return cast(AssembleWire, _WIRE.FromString(data))


def as_wire(request: assembly_pb2.AssembleRequest) -> AssembleWire:
    """An already decoded request (an in-process caller's) in the same form."""
    return parse_assemble_wire(request.SerializeToString())
