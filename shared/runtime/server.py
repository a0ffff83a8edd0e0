"""One gRPC server hosting one service (or all three), with health, reflection and a drain.

Shutdown order on SIGTERM/SIGINT or `stop()`, all within the grace period:
1. at once: every health status -> NOT_SERVING (load balancers stop sending new calls) and
   every new call is refused with UNAVAILABLE (hosts retry it on another replica);
2. in-flight calls finish;
3. each service's shutdown hook runs: capture finishes the appends it owns and hands off a
   compaction of every stream with uncommitted turns (durable in OpenViking); compaction
   stops its workers and releases their leases, so that another replica resumes at once;
4. `server.stop(remaining grace)`;
5. closers run (OpenViking client, channels, telemetry flush).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from shared.config import Settings
from shared.runtime.answer_first import AnswerFirst
from shared.runtime.interceptors import ErrorMappingInterceptor, InflightCalls
from shared.runtime.readiness import BackendReadiness, Behind
from shared.runtime.task_dump import install_task_dump, remove_task_dump
from shared.tokens import TokenCounter

log = logging.getLogger(__name__)

ShutdownHook = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class ServiceSpec:
    """What the runtime needs to host one service."""

    name: str
    """Full proto service name, e.g. `contextengine.v1.CaptureService` (also its health name)."""
    register: Callable[[aio.Server], None]
    on_shutdown: Sequence[ShutdownHook] = field(default_factory=tuple)
    """Run after in-flight calls drained, before clients close."""
    needs_backend: bool = False
    """Cannot work without OpenViking: its health follows OpenViking's (`shared.runtime.readiness`)."""
    behind: Behind | None = None
    """True while the service is too far behind to take new calls (NOT_SERVING meanwhile)."""


def server_options(settings: Settings) -> list[tuple[str, int]]:
    """Channel arguments: message size limits, keepalive, and a max connection age so that
    clients re-resolve and spread over new replicas behind Kubernetes."""
    return [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.max_connection_age_ms", settings.max_connection_age_seconds * 1000),
        ("grpc.max_connection_age_grace_ms", int(settings.shutdown_grace_seconds * 1000)),
    ]


class ServiceHost:
    """Hosts the given services on one port."""

    def __init__(
        self,
        settings: Settings,
        services: Sequence[ServiceSpec],
        *,
        closers: Sequence[ShutdownHook] = (),
        extra_interceptors: Sequence[aio.ServerInterceptor] = (),
        readiness: BackendReadiness | None = None,
    ) -> None:
        self._settings = settings
        self._readiness = readiness
        self._services = list(services)
        self._closers = list(closers)
        self._health = health.aio.HealthServicer()
        self._inflight = InflightCalls()
        self._server = aio.server(
            interceptors=[*extra_interceptors, AnswerFirst(), ErrorMappingInterceptor(self._inflight)],
            options=server_options(settings),
        )
        self._stopped = asyncio.Event()
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self._settings.grpc_host}:{self.port}"

    async def start(self, port: int | None = None) -> int:
        for spec in self._services:
            spec.register(self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        names = [spec.name for spec in self._services]
        reflection.enable_server_reflection(
            [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server
        )
        # The first count of a replica would load and parse the BPE file (~0.1-0.3 s): do it now.
        await asyncio.to_thread(TokenCounter.for_model, "", self._settings.default_encoding)
        wanted = self._settings.grpc_port if port is None else port
        self.port = self._server.add_insecure_port(f"{self._settings.grpc_host}:{wanted}")
        await self._server.start()
        serving = health_pb2.HealthCheckResponse.SERVING
        for name in ["", *names]:
            await self._health.set(name, serving)
        if self._readiness is not None:
            self._readiness.start(
                self._health,
                [spec.name for spec in self._services if spec.needs_backend],
                {spec.name: spec.behind for spec in self._services if spec.behind is not None},
            )
        log.info("serving %s on %s", ", ".join(names), self.address)
        return self.port

    async def stop(self) -> None:
        """Drain and stop; safe to call more than once."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        log.info(
            "shutting down: NOT_SERVING, draining for up to %.0fs", self._settings.shutdown_grace_seconds
        )
        grace = self._settings.shutdown_grace_seconds
        deadline = time.monotonic() + grace
        self._inflight.refuse()
        if self._readiness is not None:
            await self._readiness.stop()
        await self._health.enter_graceful_shutdown()
        try:
            async with asyncio.timeout(grace):
                await self._inflight.wait_idle()
        except TimeoutError:
            log.warning("%d calls still running after the grace period", self._inflight.count)
        for spec in self._services:
            for hook in spec.on_shutdown:
                await _run_safely(hook, f"{spec.name} shutdown hook")
        await self._server.stop(max(0.0, deadline - time.monotonic()))
        for closer in self._closers:
            await _run_safely(closer, "closer")
        log.info("stopped")

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()


async def _run_safely(hook: ShutdownHook, what: str) -> None:
    try:
        await hook()
    except Exception:
        log.exception("%s failed", what)


async def run_until_signalled(host: ServiceHost) -> None:
    """Block until SIGTERM or SIGINT, then stop the host gracefully (SIGUSR1 meanwhile logs the
    pending tasks: `shared.runtime.task_dump`)."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled.set)
    install_task_dump(loop)
    try:
        await signalled.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        remove_task_dump(loop)
    await host.stop()
