"""Every HTTP request a client sends to OpenViking, over the real network.

`CallLog` is an HTTP middleware to hand to `OpenVikingClient(middlewares=[...])`.
It notes each request's method and route, and can *hold* requests: after `hold_after(n)`, the
first `n` requests go through and every later one waits until `let_go()`. A call that returns
while requests are held did not wait for them - which is how a test shows how many OpenViking
round trips a call waits for, without timing anything.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.telemetry.tracing import openviking_route


@dataclass
class Call:
    method: str
    route: str
    held: bool
    """Held until `let_go` (whoever sent it was not waiting for it when held)."""
    started: float = 0.0
    """`time.perf_counter()` when it was handed to the transport."""
    finished: float | None = None
    """`time.perf_counter()` when its answer (or error) came back."""

    def __str__(self) -> str:
        return f"{self.method} {self.route}"


class CallLog:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.in_flight = 0
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._passes: int | None = None
        self._gate = asyncio.Event()
        self._gate.set()

    def mark(self) -> int:
        """The position of the next request (to slice `calls` with)."""
        return len(self.calls)

    def hold_after(self, passes: int) -> None:
        """Let `passes` more requests through, then hold every later one until `let_go`."""
        self._passes = passes
        self._gate.clear()

    def let_go(self) -> None:
        self._passes = None
        self._gate.set()

    async def idle(self) -> None:
        """Wait until no request is in flight or held."""
        await self._quiet.wait()

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        held = self._passes is not None and self._passes <= 0
        if self._passes is not None:
            self._passes -= 1
        call = Call(request.method, openviking_route(request.path), held, time.perf_counter())
        self.calls.append(call)
        self.in_flight += 1
        self._quiet.clear()
        try:
            if held:
                await self._gate.wait()
            return await send(request)
        finally:
            call.finished = time.perf_counter()
            self.in_flight -= 1
            if not self.in_flight:
                self._quiet.set()
