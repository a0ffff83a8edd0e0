"""gRPC health tells the truth about OpenViking (finding 6): capture and compaction are
NOT_SERVING while OpenViking is frozen or down and SERVING again once it answers; assembly,
which degrades instead of failing, and the overall status stay SERVING."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.assembly import build_assembly_service
from services.capture import build_capture_service
from services.compaction import build_compaction_service
from shared.config import load_settings
from shared.localstack.processes import free_port
from shared.runtime.context import ServiceContext, build_openviking_client
from shared.runtime.readiness import BackendReadiness
from shared.runtime.server import ServiceHost
from tests.support.delay_proxy import DelayProxy
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
NAMES = (
    "",
    "contextengine.v1.CaptureService",
    "contextengine.v1.CompactionService",
    "contextengine.v1.AssemblyService",
)


async def host_over(base_url: str) -> ServiceHost:
    settings = load_settings(
        environ={}, overrides={"baseUrl": base_url, "grpcPort": 0, "shutdownGraceSeconds": 1}
    )
    ov = build_openviking_client(settings)
    context = ServiceContext(
        settings=settings, openviking=ov, compaction_target=lambda: f"127.0.0.1:{free_port()}"
    )
    specs = [
        build_capture_service(context),
        build_compaction_service(context),
        build_assembly_service(context),
    ]
    readiness = BackendReadiness.of(ov, interval=0.2, timeout=0.5)
    host = ServiceHost(settings, specs, closers=[ov.aclose], readiness=readiness)
    await host.start(0)
    return host


async def statuses(address: str) -> tuple[int, ...]:
    async with aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return tuple(
            [(await stub.Check(health_pb2.HealthCheckRequest(service=n), timeout=5)).status for n in NAMES]
        )


async def until(address: str, wanted: tuple[int, ...], within: float = 10.0) -> None:
    give_up = time.monotonic() + within
    while (got := await statuses(address)) != wanted:
        assert time.monotonic() < give_up, got
        await asyncio.sleep(0.1)


@pytest.fixture
async def proxy(openviking: OpenVikingEndpoint) -> AsyncIterator[DelayProxy]:
    host, port = openviking.base_url.removeprefix("http://").rsplit(":", 1)
    async with DelayProxy(host, int(port)) as running:
        yield running


async def test_frozen_openviking_makes_capture_and_compaction_not_serving(proxy: DelayProxy) -> None:
    host = await host_over(proxy.base_url)
    try:
        await until(host.address, (SERVING,) * 4)
        frozen = proxy.hold("GET /health", delay=30.0, count=1000)
        await until(host.address, (SERVING, NOT_SERVING, NOT_SERVING, SERVING))
        frozen.count = 0  # OpenViking answers again
        await until(host.address, (SERVING,) * 4)
    finally:
        await host.stop()


async def test_openviking_down_makes_capture_and_compaction_not_serving() -> None:
    host = await host_over(f"http://127.0.0.1:{free_port()}")
    try:
        await until(host.address, (SERVING, NOT_SERVING, NOT_SERVING, SERVING))
    finally:
        await host.stop()
