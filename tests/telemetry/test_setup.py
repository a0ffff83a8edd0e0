from __future__ import annotations

import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.trace import NoOpTracerProvider

from shared.telemetry import setup_telemetry

_OTEL_VARS = (
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_RESOURCE_ATTRIBUTES",
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
