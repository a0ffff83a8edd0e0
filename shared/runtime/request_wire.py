"""Request types whose host messages stay in their wire bytes.

Hosts resend their whole transcript on every Assemble and AfterTurn. Decoding a request's
`messages` as bytes (the wire format of a sub-message is a length-delimited bytes field) lets a
service recognise messages it has seen before by their bytes alone, and decode, validate and
count only the new ones (`shared.domain.host_messages`). A wire type is derived from the
request's own descriptor, so it follows the contract's field numbers; only `messages` changes type.
"""

from __future__ import annotations

from typing import Generic, TypeVar, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

WIRE_PACKAGE = "contextengine.v1.wire"


def wire_type(request: type[Message]) -> type[Message]:
    """`request`'s message type with `messages` as repeated bytes (registered once per type)."""
    message = descriptor_pb2.DescriptorProto()
    request.DESCRIPTOR.CopyToProto(message)
    message.name = f"{request.DESCRIPTOR.name}Wire"
    messages = next(f for f in message.field if f.name == "messages")
    messages.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    messages.ClearField("type_name")
    source = request.DESCRIPTOR.file
    wire_file = descriptor_pb2.FileDescriptorProto(
        name=f"{WIRE_PACKAGE.replace('.', '/')}/{message.name}.proto",
        package=WIRE_PACKAGE,
        syntax="proto3",
        dependency=[d.name for d in source.dependencies],
        message_type=[message],
    )
    pool = descriptor_pool.Default()
    pool.AddSerializedFile(wire_file.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{WIRE_PACKAGE}.{message.name}"))


W = TypeVar("W")
"""A Protocol naming the request's fields, its `messages` as `Sequence[bytes]`."""


class WireCodec(Generic[W]):
    """Decodes one request type into its wire form `W`."""

    def __init__(self, request: type[Message]) -> None:
        self._wire = wire_type(request)

    def parse(self, data: bytes) -> W:
        """The gRPC request deserializer."""
        return cast(W, self._wire.FromString(data))

    def of(self, request: Message) -> W:
        """An already decoded request (an in-process caller's) in the same form."""
        return self.parse(request.SerializeToString())
