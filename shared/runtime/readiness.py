"""Readiness that tells the truth about OpenViking (gRPC health, per service name).

Decision: capture and compaction cannot do their job without OpenViking (every write, every
commit goes there), so their health is NOT_SERVING while OpenViking is down or frozen - no
answer to `GET /health` within the probe timeout for `FAILURES_BEFORE_NOT_SERVING` probes in a
row - and SERVING again on the first answer. With several shards, that is while every shard
is down; each shard's own state is the health name `openviking/<shard>`. Assembly stays
SERVING: without OpenViking it still answers a valid, degraded context (docs/design.md §4), which is
better than no answer. The overall ("") status only says the process is up and not draining
(it is the liveness probe).

A service may also say it is behind (`ServiceSpec.behind`, e.g. capture's background queue past
its soft bound): it is NOT_SERVING while it is, so that new calls go to other replicas; it keeps
serving the calls it gets (its hard bound is its own, `services.capture.backlog`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from grpc_health.v1 import health, health_pb2

from shared.openviking.client import OpenVikingClient

log = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 5.0
PROBE_TIMEOUT_SECONDS = 2.0
FAILURES_BEFORE_NOT_SERVING = 2

Probe = Callable[[], Awaitable[object]]
Behind = Callable[[], bool]
"""True while a service is too far behind to take new work."""
_STATUS = {True: health_pb2.HealthCheckResponse.SERVING, False: health_pb2.HealthCheckResponse.NOT_SERVING}


def shard_health_name(shard: str) -> str:
    """The gRPC health name of one OpenViking shard's reachability."""
    return f"openviking/{shard}"


class BackendReadiness:
    """Probes every OpenViking shard and sets the health of the services that depend on them.

    Each shard has its own health name (`openviking/<shard>`), NOT_SERVING while that shard is
    down; the dependent services are NOT_SERVING only while every shard is down (a replica still
    serves the tenants of the shards that answer; the others get UNAVAILABLE naming the shard).
    """

    def __init__(
        self,
        probes: Mapping[str, Probe],
        *,
        interval: float = PROBE_INTERVAL_SECONDS,
        timeout: float = PROBE_TIMEOUT_SECONDS,
        failures_before_not_serving: int = FAILURES_BEFORE_NOT_SERVING,
    ) -> None:
        """`probes` maps each shard's name to its probe (e.g. its `GET /health`)."""
        self._probes = dict(probes)
        self._interval = interval
        self._timeout = timeout
        self._threshold = failures_before_not_serving
        self._task: asyncio.Task[None] | None = None
        self._failures = dict.fromkeys(self._probes, 0)
        self.shard_up = dict.fromkeys(self._probes, True)

    @classmethod
    def of(
        cls,
        client: OpenVikingClient,
        *,
        interval: float = PROBE_INTERVAL_SECONDS,
        timeout: float = PROBE_TIMEOUT_SECONDS,
    ) -> BackendReadiness:
        """Readiness over each shard's `GET /health`."""
        probes = {name: shard.health for name, shard in client.shards.items()}
        return cls(probes, interval=interval, timeout=timeout)

    @property
    def backend_up(self) -> bool:
        """At least one shard answers."""
        return any(self.shard_up.values())

    def start(
        self,
        servicer: health.aio.HealthServicer,
        names: Sequence[str],
        behind: Mapping[str, Behind] | None = None,
    ) -> None:
        """Watch the shards for `names`; a name in `behind` is also NOT_SERVING while it says so."""
        if self._task is None:
            self._task = asyncio.create_task(
                self._watch(servicer, list(names), dict(behind or {})), name="backend-readiness"
            )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _answers(self, probe: Probe) -> bool:
        try:
            await asyncio.wait_for(probe(), self._timeout)
        except Exception:  # down, frozen, or answering garbage: not ready
            return False
        return True

    async def _watch(
        self, servicer: health.aio.HealthServicer, names: list[str], behind: dict[str, Behind]
    ) -> None:
        for shard in self._probes:
            await servicer.set(shard_health_name(shard), _STATUS[True])
        serving = dict.fromkeys(names, True)
        lagged = dict.fromkeys(names, False)
        while True:
            was_up = self.backend_up
            answers = await asyncio.gather(*(self._answers(probe) for probe in self._probes.values()))
            for shard, answered in zip(self._probes, answers, strict=True):
                await self._record(servicer, shard, answered)
            up = self.backend_up
            if up != was_up:
                log.warning("OpenViking %s: %s", "answers again" if up else "is down on every shard",
                            ", ".join(names) + (" SERVING" if up else " NOT_SERVING"))  # fmt: skip
            for name in names:
                lagging = name in behind and behind[name]()
                if lagging != lagged[name]:
                    lagged[name] = lagging
                    log.warning("%s is %s", name, "behind on its background work" if lagging else "caught up")
                if serving[name] != (up and not lagging):
                    serving[name] = up and not lagging
                    await servicer.set(name, _STATUS[serving[name]])
            await asyncio.sleep(self._interval)

    async def _record(self, servicer: health.aio.HealthServicer, shard: str, answered: bool) -> None:
        self._failures[shard] = 0 if answered else self._failures[shard] + 1
        up = answered or (self.shard_up[shard] and self._failures[shard] < self._threshold)
        if up != self.shard_up[shard]:
            self.shard_up[shard] = up
            log.warning("OpenViking shard %s %s", shard, "answers again" if up else "is down or frozen")
            await servicer.set(shard_health_name(shard), _STATUS[up])
