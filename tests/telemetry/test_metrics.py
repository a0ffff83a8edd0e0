from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from services.capture.backlog import CaptureBackground, IndexBacklog
from shared.config import load_settings
from shared.domain.turn_index import IndexedMessage
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.openviking.tenant import Tenant
from shared.runtime.context import build_openviking_client
from shared.telemetry import metrics as engine
from shared.telemetry.metrics import EngineMetrics
from tests.capture.messages import user

TENANT = Tenant("acme", "u1")
MESSAGE = user("what did we decide about the deployment?")


def test_instruments_have_the_documented_names() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instruments = EngineMetrics(provider.get_meter("test"))
    labels = {"rpc.service": "s", "rpc.method": "m", "rpc.grpc.status_code": "OK"}
    instruments.rpc_duration.record(0.01, labels)
    instruments.assembled_tokens.record(1200)
    instruments.recall_hits.add(3)
    instruments.triggers.add(1, {"contextengine.compaction.trigger": "COMPACTION_TRIGGER_TURNS"})
    instruments.compaction_duration.record(2.0)
    instruments.compaction_failures.add(1)
    instruments.openviking_duration.record(0.002)
    instruments.openviking_errors.add(1)
    instruments.turn_index_lag.record(0.2)
    instruments.background_refused.add(1)
    data = reader.get_metrics_data()
    assert data is not None
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    # The background gauges report whenever a source is registered in the process (an earlier
    # test's capture replica may have left one): the next test checks them with a source.
    assert names - {"contextengine.background.depth", "contextengine.background.age"} == {
        "contextengine.rpc.duration",
        "contextengine.assembly.tokens",
        "contextengine.recall.hits",
        "contextengine.compaction.triggers",
        "contextengine.compaction.duration",
        "contextengine.compaction.failures",
        "contextengine.openviking.duration",
        "contextengine.openviking.errors",
        "contextengine.turn_index.lag",
        "contextengine.background.refused",
    }  # (the background gauges report only with a source: the next test)
    provider.shutdown()


def test_recording_functions_are_safe_without_a_provider() -> None:
    engine.record_rpc("contextengine.v1.CaptureService", "AfterTurn", "OK", 0.01)
    engine.record_assembled_tokens(100)
    engine.record_recall_hits(0, degraded=True)
    engine.record_trigger("COMPACTION_TRIGGER_TURNS")
    engine.record_compaction(1.5, trigger="COMPACTION_TRIGGER_TURNS", outcome="completed")
    engine.record_compaction_failure("TaskFailed", trigger="COMPACTION_TRIGGER_TURNS")
    engine.record_openviking_call("GET", "/api/v1/tasks/{id}", "200", 0.003)
    engine.record_openviking_call("GET", "/api/v1/tasks/{id}", "ConnectError", 0.003)
    engine.record_turn_index_lag(0.4)
    engine.record_background_refused("AfterTurn", "turn_index")


async def test_background_gauges_sum_the_queues_of_every_replica_and_report_the_oldest() -> None:
    """Two capture replicas' queues in one process (as `--service all` with shards would have):
    depth is summed per queue, age is the oldest item's."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    settings = load_settings(environ={}, overrides={"baseUrl": "http://127.0.0.1:1"})
    now = [100.0]
    async with build_openviking_client(settings) as ov:
        one = IndexBacklog(TurnIndexWriter(ov), clock=lambda: now[0])
        two = IndexBacklog(TurnIndexWriter(ov), clock=lambda: now[0])
        one.add(TENANT, "s-1", [IndexedMessage(0, MESSAGE)] * 3)
        now[0] = 107.0
        two.add(TENANT, "s-2", [IndexedMessage(0, MESSAGE)] * 2)
        now[0] = 110.0
        sources = [CaptureBackground(one, lambda: 4, lambda: 1), CaptureBackground(two, lambda: 0, lambda: 0)]
        EngineMetrics(provider.get_meter("test"), background=lambda: sources)
        points = _gauge_points(reader)
        assert points["contextengine.background.depth"] == {"turn_index": 5, "appends": 4, "nudges": 1}
        assert points["contextengine.background.age"]["turn_index"] == 10.0
        for backlog in (one, two):  # nothing to write to: the workers end, their writes logged
            await backlog.drain()
    provider.shutdown()


def _gauge_points(reader: InMemoryMetricReader) -> dict[str, dict[str, float]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: {
            str(p.attributes["contextengine.background.work"]): p.value for p in metric.data.data_points
        }
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name.startswith("contextengine.background.")
        and metric.name != "contextengine.background.refused"
    }
