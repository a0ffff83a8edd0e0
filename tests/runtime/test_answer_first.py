"""Work a call leaves for after its answer starts once gRPC has sent the answer (a real aio
server with the engine's interceptors)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc import aio

from shared.errors import InvalidArgument
from shared.runtime.answer_first import AnswerFirst, after_answer
from shared.runtime.interceptors import ErrorMappingInterceptor

SERVICE = "test.AnswerFirst"
YIELDS_BEFORE_ANSWERING = 20
"""Loop turns a handler gives its background work before it answers (far below the wait cap)."""


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.work: list[asyncio.Task[None]] = []

    def leave_work(self) -> None:
        async def later() -> None:
            await after_answer()
            self.events.append("work")

        self.work.append(asyncio.create_task(later()))

    async def answer(self, request: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
        self.leave_work()
        for _ in range(YIELDS_BEFORE_ANSWERING):
            await asyncio.sleep(0)
        self.events.append("answer")
        return request

    async def fail(self, request: bytes, context: aio.ServicerContext[Any, Any]) -> bytes:
        self.leave_work()
        raise InvalidArgument("payload", "is not wanted")


@pytest.fixture
async def served() -> AsyncIterator[tuple[Recorder, aio.Channel]]:
    recorder = Recorder()
    server = aio.server(interceptors=[AnswerFirst(), ErrorMappingInterceptor()])
    handlers = {
        "Answer": grpc.unary_unary_rpc_method_handler(recorder.answer),
        "Fail": grpc.unary_unary_rpc_method_handler(recorder.fail),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield recorder, channel
    await server.stop(None)


async def test_work_left_by_a_call_starts_after_its_answer(served: tuple[Recorder, aio.Channel]) -> None:
    recorder, channel = served
    for payload in (b"one", b"two"):
        assert await channel.unary_unary(f"/{SERVICE}/Answer")(payload, timeout=5) == payload
        await asyncio.wait_for(recorder.work[-1], 5)
    assert recorder.events == ["answer", "work", "answer", "work"]


async def test_a_failed_call_releases_its_work_too(served: tuple[Recorder, aio.Channel]) -> None:
    recorder, channel = served
    with pytest.raises(aio.AioRpcError) as failed:
        await channel.unary_unary(f"/{SERVICE}/Fail")(b"x", timeout=5)
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    await asyncio.wait_for(recorder.work[-1], 5)
    assert recorder.events == ["work"]


def test_outside_a_call_nothing_waits() -> None:
    waiting = after_answer()
    with pytest.raises(StopIteration):
        waiting.send(None)  # finished without suspending once
