"""Readiness over several shards: each shard has its own health name, and the services that need
OpenViking go NOT_SERVING only while every shard is down (over a real gRPC health server)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from shared.runtime.readiness import BackendReadiness

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
CAPTURE = "contextengine.v1.CaptureService"
NAMES = ("openviking/ov-0", "openviking/ov-1", CAPTURE)


class Switchable:
    """A probe that answers while `up` and fails otherwise."""

    def __init__(self) -> None:
        self.up = True

    async def __call__(self) -> object:
        if not self.up:
            raise ConnectionError("down")
        return None


@pytest.fixture
async def health_server() -> AsyncIterator[tuple[health.aio.HealthServicer, str]]:
    servicer = health.aio.HealthServicer()
    server = aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await servicer.set(CAPTURE, SERVING)
    yield servicer, f"127.0.0.1:{port}"
    await server.stop(0)


async def until(address: str, wanted: tuple[int, ...], within: float = 5.0) -> None:
    async with aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        give_up = time.monotonic() + within
        while True:
            got = tuple([(await stub.Check(health_pb2.HealthCheckRequest(service=n))).status for n in NAMES])
            if got == wanted:
                return
            assert time.monotonic() < give_up, got
            await asyncio.sleep(0.05)


async def test_services_go_not_serving_only_when_every_shard_is_down(
    health_server: tuple[health.aio.HealthServicer, str],
) -> None:
    servicer, address = health_server
    shards = {"ov-0": Switchable(), "ov-1": Switchable()}
    readiness = BackendReadiness(shards, interval=0.05, timeout=0.5)
    readiness.start(servicer, [CAPTURE])
    try:
        await until(address, (SERVING, SERVING, SERVING))
        shards["ov-1"].up = False
        await until(address, (SERVING, NOT_SERVING, SERVING))
        assert readiness.backend_up
        shards["ov-0"].up = False
        await until(address, (NOT_SERVING, NOT_SERVING, NOT_SERVING))
        assert not readiness.backend_up
        shards["ov-1"].up = True
        await until(address, (NOT_SERVING, SERVING, SERVING))
    finally:
        await readiness.stop()


async def test_a_service_behind_on_its_background_work_is_not_serving_until_it_caught_up(
    health_server: tuple[health.aio.HealthServicer, str],
) -> None:
    """Capture's turn index queue past its soft bound: new calls should go to other replicas; a
    backend outage meanwhile keeps it NOT_SERVING after the queue caught up."""
    servicer, address = health_server
    shards = {"ov-0": Switchable(), "ov-1": Switchable()}
    backlog = {"behind": False}
    readiness = BackendReadiness(shards, interval=0.05, timeout=0.5)
    readiness.start(servicer, [CAPTURE], {CAPTURE: lambda: backlog["behind"]})
    try:
        await until(address, (SERVING, SERVING, SERVING))
        backlog["behind"] = True
        await until(address, (SERVING, SERVING, NOT_SERVING))
        shards["ov-0"].up = shards["ov-1"].up = False
        await until(address, (NOT_SERVING, NOT_SERVING, NOT_SERVING))
        backlog["behind"] = False
        await asyncio.sleep(0.3)
        await until(address, (NOT_SERVING, NOT_SERVING, NOT_SERVING))
        shards["ov-0"].up = True
        await until(address, (SERVING, NOT_SERVING, SERVING))
    finally:
        await readiness.stop()
