"""Registering a service's unary methods with a request decoder of the service's choosing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from grpc import aio

WireMethod = tuple[Callable[..., Any], Callable[[bytes], Any]]
"""(the servicer's coroutine, what decodes its request bytes)."""


def add_unary_service(
    server: aio.Server, service: ServiceDescriptor, servicer: object, wire: Mapping[str, WireMethod]
) -> None:
    """Every method of `service`, as the generated `add_*Servicer_to_server` registers it, except
    that a method named in `wire` runs its own coroutine on its own decoding of the request."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in service.methods:
        default: WireMethod = (
            getattr(servicer, method.name),
            message_factory.GetMessageClass(method.input_type).FromString,
        )
        behaviour, decode = wire.get(method.name, default)
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            behaviour,
            request_deserializer=decode,
            response_serializer=message_factory.GetMessageClass(method.output_type).SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
