"""Work a call leaves for after its answer starts once the answer has left.

Capture answers a steady turn as soon as its claim is stored and writes the rest (the append of
the claimed messages, the turn index; the compaction nudge of a turn that handed one off) in
tasks of its own. Started at once, those tasks' first steps (building a request body, sending
it) ran on the event loop between the handler's return and gRPC sending the response: about
3 ms more on every answer (issue 16, measured with the capture-path bench's segment timings).
`AnswerFirst` gives each unary call an event that gRPC sets when it has finished the call
(`add_done_callback`), and `after_answer` waits for it - at most `ANSWER_WAIT_SECONDS`, so that
a call gRPC never reports finished delays nothing for long.
Outside a gRPC call (in-process callers, tests) `after_answer` returns at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from contextvars import ContextVar
from typing import Any

import grpc
from grpc import aio

from shared.runtime.interceptors import UNGUARDED_PREFIXES, UnaryHandler, UnaryInterceptor

ANSWER_WAIT_SECONDS = 0.05
"""Longest that work left for after an answer waits for it."""

_answered: ContextVar[asyncio.Event | None] = ContextVar("answered", default=None)
"""The running call's event (tasks started by the call inherit it)."""


async def after_answer() -> None:
    """Return once the gRPC call that started this work has been answered (or at once outside
    one, or when it was answered already)."""
    answered = _answered.get()
    if answered is None or answered.is_set():
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(ANSWER_WAIT_SECONDS):
            await answered.wait()


class AnswerFirst(UnaryInterceptor):
    """Marks each unary call answered when gRPC is done with it (response or error sent); probes
    and reflection leave no work behind and pass untouched."""

    def wrap(self, details: grpc.HandlerCallDetails, inner: UnaryHandler) -> UnaryHandler | None:
        if details.method.startswith(UNGUARDED_PREFIXES):
            return None

        async def handler(request: Any, context: aio.ServicerContext[Any, Any]) -> Any:
            answered = asyncio.Event()

            def done(_: aio.ServicerContext[Any, Any]) -> None:
                answered.set()

            context.add_done_callback(done)  # type: ignore[arg-type]  # grpc-stubs: a class, not a Protocol
            token = _answered.set(answered)
            try:
                return await inner(request, context)
            finally:
                _answered.reset(token)

        return handler
