"""Server interceptors: the one place where engine errors become gRPC statuses."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import grpc
from grpc import aio

from shared.errors import ContextEngineError

log = logging.getLogger(__name__)

UnaryHandler = Callable[[Any, aio.ServicerContext[Any, Any]], Awaitable[Any]]


def _map_errors(method: str, inner: UnaryHandler) -> UnaryHandler:
    async def handler(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await inner(request, context)
        except ContextEngineError as exc:
            log.info("%s failed: %s %s", method, exc.status_code.name, exc.message)
            await context.abort(exc.status_code, exc.message)
        except aio.AbortError:
            raise
        except Exception:
            log.exception("%s failed with an unexpected error", method)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error")

    return handler


class ErrorMappingInterceptor(aio.ServerInterceptor):
    """Maps `ContextEngineError` to its status and anything else to a bare INTERNAL."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = cast(UnaryHandler, handler.unary_unary)
        return grpc.unary_unary_rpc_method_handler(
            _map_errors(handler_call_details.method, inner),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
