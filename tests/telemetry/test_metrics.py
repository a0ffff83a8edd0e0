from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from shared.telemetry import metrics as engine
from shared.telemetry.metrics import EngineMetrics


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
    data = reader.get_metrics_data()
    assert data is not None
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert names == {
        "contextengine.rpc.duration",
        "contextengine.assembly.tokens",
        "contextengine.recall.hits",
        "contextengine.compaction.triggers",
        "contextengine.compaction.duration",
        "contextengine.compaction.failures",
        "contextengine.openviking.duration",
        "contextengine.openviking.errors",
    }
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
