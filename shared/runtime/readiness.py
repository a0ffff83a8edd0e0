"""Readiness that tells the truth about OpenViking (gRPC health, per service name).

Decision: capture and compaction cannot do their job without OpenViking (every write, every
commit goes there), so their health is NOT_SERVING while OpenViking is down or frozen - no
answer to `GET /health` within the probe timeout for `FAILURES_BEFORE_NOT_SERVING` probes in a
row - and SERVING again on the first answer. Assembly stays SERVING: without OpenViking it
still answers a valid, degraded context (design §4), which is better than no answer. The
overall ("") status only says the process is up and not draining (it is the liveness probe).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from grpc_health.v1 import health, health_pb2

log = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 5.0
PROBE_TIMEOUT_SECONDS = 2.0
FAILURES_BEFORE_NOT_SERVING = 2

Probe = Callable[[], Awaitable[object]]


class BackendReadiness:
    """Probes OpenViking and sets the health of the services that depend on it."""

    def __init__(
        self,
        probe: Probe,
        *,
        interval: float = PROBE_INTERVAL_SECONDS,
        timeout: float = PROBE_TIMEOUT_SECONDS,
        failures_before_not_serving: int = FAILURES_BEFORE_NOT_SERVING,
    ) -> None:
        self._probe = probe
        self._interval = interval
        self._timeout = timeout
        self._threshold = failures_before_not_serving
        self._task: asyncio.Task[None] | None = None
        self.backend_up = True

    def start(self, servicer: health.aio.HealthServicer, names: Sequence[str]) -> None:
        if names and self._task is None:
            self._task = asyncio.create_task(self._watch(servicer, list(names)), name="backend-readiness")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _answers(self) -> bool:
        try:
            await asyncio.wait_for(self._probe(), self._timeout)
        except Exception:  # down, frozen, or answering garbage: not ready
            return False
        return True

    async def _watch(self, servicer: health.aio.HealthServicer, names: list[str]) -> None:
        failures = 0
        while True:
            if await self._answers():
                failures = 0
                up = True
            else:
                failures += 1
                up = self.backend_up and failures < self._threshold
            if up != self.backend_up:
                self.backend_up = up
                log.warning("OpenViking %s: %s", "answers again" if up else "is down or frozen",
                            ", ".join(names) + (" SERVING" if up else " NOT_SERVING"))  # fmt: skip
                status = (
                    health_pb2.HealthCheckResponse.SERVING
                    if up
                    else health_pb2.HealthCheckResponse.NOT_SERVING
                )
                for name in names:
                    await servicer.set(name, status)
            await asyncio.sleep(self._interval)
