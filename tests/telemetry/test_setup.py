from __future__ import annotations

import urllib.request

import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.trace import NoOpTracerProvider

from shared.localstack.processes import free_port
from shared.telemetry import setup_telemetry
from shared.telemetry.metrics import EngineMetrics

_OTEL_VARS = (
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_PROMETHEUS_HOST",
    "OTEL_EXPORTER_PROMETHEUS_PORT",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _OTEL_VARS:
        monkeypatch.delenv(name, raising=False)


def test_no_endpoint_means_no_op_providers_and_no_warnings() -> None:
    telemetry = setup_telemetry("contextengine-capture", install_global=False)
    assert isinstance(telemetry.tracer_provider, NoOpTracerProvider)
    assert isinstance(telemetry.meter_provider, NoOpMeterProvider)
    assert not telemetry.traces_enabled and not telemetry.metrics_enabled
    telemetry.shutdown()


def test_no_endpoint_with_global_install_changes_nothing() -> None:
    telemetry = setup_telemetry("contextengine-capture")
    telemetry.shutdown()
    telemetry.shutdown()


def test_endpoint_gives_sdk_providers_with_the_service_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    telemetry = setup_telemetry("contextengine-assembly", install_global=False)
    tracer_provider, meter_provider = telemetry.tracer_provider, telemetry.meter_provider
    assert isinstance(tracer_provider, SdkTracerProvider)
    assert isinstance(meter_provider, SdkMeterProvider)
    try:
        attributes = tracer_provider.resource.attributes
        assert attributes["service.name"] == "contextengine-assembly"
        assert attributes["deployment.environment"] == "test"
    finally:
        meter_provider.shutdown(timeout_millis=100)  # nothing buffered; skip the export
        tracer_provider.shutdown()


def test_otel_service_name_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "custom")
    telemetry = setup_telemetry("contextengine-assembly", install_global=False)
    tracer_provider = telemetry.tracer_provider
    assert isinstance(tracer_provider, SdkTracerProvider)
    try:
        assert telemetry.service_name == "custom"
        assert telemetry.traces_enabled and not telemetry.metrics_enabled
        assert tracer_provider.resource.attributes["service.name"] == "custom"
    finally:
        tracer_provider.shutdown()


@pytest.mark.parametrize(("name", "value"), [("OTEL_SDK_DISABLED", "true"), ("OTEL_TRACES_EXPORTER", "none")])
def test_switches_turn_traces_off(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv(name, value)
    telemetry = setup_telemetry("contextengine", install_global=False)
    assert isinstance(telemetry.tracer_provider, NoOpTracerProvider)


def test_prometheus_in_the_metrics_exporters_serves_a_scrape_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Scraped over real HTTP: the engine's instruments, capture's background gauges among them."""
    port = free_port()
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", str(port))
    telemetry = setup_telemetry("contextengine-capture", install_global=False)
    try:
        assert telemetry.metrics_enabled and telemetry.scrape is not None
        assert isinstance(telemetry.meter_provider, SdkMeterProvider)
        queues = _Queues()
        instruments = EngineMetrics(telemetry.meter_provider.get_meter("test"), background=lambda: [queues])
        instruments.turn_index_lag.record(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            scraped = answer.read().decode()
        assert 'contextengine_background_depth{contextengine_background_work="turn_index"' in scraped
        assert "contextengine_turn_index_lag_seconds_count" in scraped
    finally:
        telemetry.shutdown()


class _Queues:
    def background_queues(self) -> dict[str, tuple[int, float]]:
        return {"turn_index": (7, 1.5)}
