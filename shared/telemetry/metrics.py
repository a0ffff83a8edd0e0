"""The engine's metrics and the small functions that record them.

Instruments (exported over OTLP when `OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT` is set):

- `contextengine.rpc.duration` (histogram, s): every RPC; `rpc.service`, `rpc.method`,
  `rpc.grpc.status_code`. Recorded by the server interceptor.
- `contextengine.assembly.tokens` (histogram, {token}): tokens of each assembled context.
- `contextengine.recall.hits` (counter, {memory}): memories recalled.
- `contextengine.compaction.triggers` (counter): triggers fired, by `contextengine.compaction.trigger`.
- `contextengine.compaction.duration` (histogram, s) and `contextengine.compaction.failures` (counter).
- `contextengine.openviking.duration` (histogram, s) and `contextengine.openviking.errors` (counter):
  every OpenViking HTTP call, by method and route. Recorded by the OpenViking transport.
- `contextengine.background.depth` (gauge, {item}) and `contextengine.background.age` (gauge, s):
  each replica's background queues (`contextengine.background.work`: `turn_index` exchanges,
  owned `appends`, compaction `nudges`) and how long the oldest item waited; what an autoscaler
  reads (`watch_background`).
- `contextengine.turn_index.lag` (histogram, s): from a turn's answer to its index write's.
- `contextengine.background.refused` (counter, {call}): calls refused at a hard bound, by method.

The module functions use the process-wide meter provider installed by `setup_telemetry`
(the API's no-op provider until then); `EngineMetrics(meter)` records into any meter (tests).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Protocol

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from shared.telemetry import attributes as attr

METER_NAME = "contextengine"

_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)
_TOKEN_BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 1048576)


class EngineMetrics:
    """All engine instruments on one meter."""

    def __init__(
        self, meter: Meter, background: Callable[[], Iterable[BackgroundSource]] = lambda: list(_SOURCES)
    ) -> None:
        """`background`: the sources the background gauges sum (those `watch_background` got)."""
        self.rpc_duration = meter.create_histogram(
            "contextengine.rpc.duration",
            unit="s",
            description="Duration of engine RPCs, server side.",
            explicit_bucket_boundaries_advisory=list(_SECONDS_BUCKETS),
        )
        self.assembled_tokens = meter.create_histogram(
            "contextengine.assembly.tokens",
            unit="{token}",
            description="Tokens of each assembled context.",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        self.recall_hits = meter.create_counter(
            "contextengine.recall.hits", unit="{memory}", description="Memories recalled."
        )
        self.triggers = meter.create_counter(
            "contextengine.compaction.triggers", unit="{trigger}", description="Compaction triggers fired."
        )
        self.compaction_duration = meter.create_histogram(
            "contextengine.compaction.duration",
            unit="s",
            description="Duration of compactions, from commit to finalised checkpoint.",
            explicit_bucket_boundaries_advisory=list(_SECONDS_BUCKETS),
        )
        self.compaction_failures = meter.create_counter(
            "contextengine.compaction.failures", unit="{compaction}", description="Compactions that failed."
        )
        self.openviking_duration = meter.create_histogram(
            "contextengine.openviking.duration",
            unit="s",
            description="Duration of OpenViking HTTP calls.",
            explicit_bucket_boundaries_advisory=list(_SECONDS_BUCKETS),
        )
        self.openviking_errors = meter.create_counter(
            "contextengine.openviking.errors",
            unit="{call}",
            description="OpenViking HTTP calls that failed (transport error or status >= 400).",
        )
        self.turn_index_lag = meter.create_histogram(
            "contextengine.turn_index.lag",
            unit="s",
            description="From a turn's answer until its exchanges' turn index write was accepted.",
            explicit_bucket_boundaries_advisory=list(_SECONDS_BUCKETS),
        )
        self.background_refused = meter.create_counter(
            "contextengine.background.refused",
            unit="{call}",
            description="Calls refused because a background queue was at its hard bound.",
        )
        meter.create_observable_gauge(
            "contextengine.background.depth",
            callbacks=[_observe(background, lambda queue: queue[0])],
            unit="{item}",
            description="Items queued in a replica's background work.",
        )
        meter.create_observable_gauge(
            "contextengine.background.age",
            callbacks=[_observe(background, lambda queue: queue[1])],
            unit="s",
            description="How long the oldest item of a background queue has waited.",
        )


class BackgroundSource(Protocol):
    def background_queues(self) -> Mapping[str, tuple[int, float]]:
        """Each queue's (depth, age of its oldest item in seconds), by name."""
        ...


_SOURCES: weakref.WeakSet[BackgroundSource] = weakref.WeakSet()


def watch_background(source: BackgroundSource) -> None:
    """Report `source`'s queues in the background gauges while it lives."""
    _SOURCES.add(source)


def _observe(
    sources: Callable[[], Iterable[BackgroundSource]], pick: Callable[[tuple[int, float]], float]
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """A gauge callback: the depth (or age) of each queue, summed (oldest) over the sources."""

    def observe(_: CallbackOptions) -> Iterable[Observation]:
        totals: dict[str, tuple[int, float]] = {}
        for source in sources():
            for work, (depth, age) in source.background_queues().items():
                seen = totals.get(work, (0, 0.0))
                totals[work] = (seen[0] + depth, max(seen[1], age))
        return [Observation(pick(queue), {attr.BACKGROUND_WORK: work}) for work, queue in totals.items()]

    return observe


@cache
def engine_metrics() -> EngineMetrics:
    """The instruments on the process-wide meter provider (bound late by the API's proxy)."""
    return EngineMetrics(metrics.get_meter(METER_NAME))


def record_rpc(service: str, method: str, status: str, seconds: float) -> None:
    """One finished RPC (the server interceptor calls this)."""
    engine_metrics().rpc_duration.record(
        seconds, {attr.RPC_SERVICE: service, attr.RPC_METHOD: method, attr.RPC_STATUS: status}
    )


def record_assembled_tokens(tokens: int) -> None:
    """Tokens of the context one Assemble returned."""
    engine_metrics().assembled_tokens.record(tokens)


def record_recall_hits(count: int, *, degraded: bool = False) -> None:
    """Memories recalled by one Assemble / RecallMemories / RecallFallback (0 is fine)."""
    engine_metrics().recall_hits.add(count, {attr.DEGRADED: degraded})


def record_trigger(trigger: str) -> None:
    """A compaction trigger fired; `trigger` is its `CompactionTrigger` enum name."""
    engine_metrics().triggers.add(1, {attr.TRIGGER_FIRED: trigger})


def record_compaction(seconds: float, *, trigger: str, outcome: str) -> None:
    """A compaction ended: `outcome` is `completed`, `failed` or `skipped`."""
    engine_metrics().compaction_duration.record(
        seconds, {attr.TRIGGER_FIRED: trigger, attr.COMPACTION_OUTCOME: outcome}
    )


def record_compaction_failure(error_type: str, *, trigger: str = "") -> None:
    """A compaction failed; `error_type` is a short stable reason (exception class name, task state)."""
    labels = {attr.ERROR_TYPE: error_type}
    if trigger:
        labels[attr.TRIGGER_FIRED] = trigger
    engine_metrics().compaction_failures.add(1, labels)


def record_openviking_call(method: str, route: str, status: str, seconds: float) -> None:
    """One OpenViking HTTP call (the transport calls this); `status` is the HTTP status or error type."""
    labels = {attr.HTTP_METHOD: method, attr.HTTP_ROUTE: route, attr.HTTP_STATUS: status}
    engine_metrics().openviking_duration.record(seconds, labels)
    if not status.isdigit() or int(status) >= 400:
        engine_metrics().openviking_errors.add(1, labels)


def record_turn_index_lag(seconds: float) -> None:
    """One exchange's time from its turn's answer to its accepted index write."""
    engine_metrics().turn_index_lag.record(seconds)


def record_background_refused(method: str, work: str) -> None:
    """A call refused because the `work` queue was at its hard bound."""
    engine_metrics().background_refused.add(1, {attr.RPC_METHOD: method, attr.BACKGROUND_WORK: work})
