"""Server interceptors: the one place where engine errors become gRPC statuses, and where
in-flight calls are counted - and new ones refused - for the shutdown drain."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import grpc
from grpc import aio

from shared.errors import ContextEngineError

log = logging.getLogger(__name__)

UnaryHandler = Callable[[Any, aio.ServicerContext[Any, Any]], Awaitable[Any]]


REFUSED_WHILE_DRAINING = "this replica is shutting down; retry (another replica answers)"
UNGUARDED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
"""Calls answered even while draining (probes must see NOT_SERVING, not an error)."""


class InflightCalls:
    """How many calls are running; `wait_idle` lets shutdown wait for them; once `refuse` is
    called, new calls fail at once with UNAVAILABLE (safe to retry elsewhere)."""

    def __init__(self) -> None:
        self.count = 0
        self.refusing = False
        self._idle = asyncio.Event()
        self._idle.set()

    def refuse(self) -> None:
        self.refusing = True

    def enter(self) -> None:
        self.count += 1
        self._idle.clear()

    def exit(self) -> None:
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no call is running (bound it with `asyncio.timeout`)."""
        await self._idle.wait()


def _map_errors(method: str, inner: UnaryHandler, inflight: InflightCalls) -> UnaryHandler:
    async def handler(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
        if inflight.refusing:
            await context.abort(grpc.StatusCode.UNAVAILABLE, REFUSED_WHILE_DRAINING)
        inflight.enter()
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
        finally:
            inflight.exit()

    return handler


class UnaryInterceptor(aio.ServerInterceptor):
    """Base of the engine's interceptors: `wrap` decorates each unary-unary handler (None leaves
    it as it is); other handler kinds pass through."""

    def wrap(self, details: grpc.HandlerCallDetails, inner: UnaryHandler) -> UnaryHandler | None:
        raise NotImplementedError

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        wrapped = self.wrap(handler_call_details, cast(UnaryHandler, handler.unary_unary))
        if wrapped is None:
            return handler
        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class ErrorMappingInterceptor(UnaryInterceptor):
    """Maps `ContextEngineError` to its status and anything else to a bare INTERNAL; counts
    running calls in `inflight`."""

    def __init__(self, inflight: InflightCalls | None = None) -> None:
        self._inflight = inflight or InflightCalls()

    def wrap(self, details: grpc.HandlerCallDetails, inner: UnaryHandler) -> UnaryHandler | None:
        if details.method.startswith(UNGUARDED_PREFIXES):
            return None
        return _map_errors(details.method, inner, self._inflight)
