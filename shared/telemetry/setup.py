"""Telemetry start-up from the standard `OTEL_*` environment only.

Read here: `OTEL_SDK_DISABLED`, `OTEL_SERVICE_NAME` (overrides the per-service default),
`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_ENDPOINT` and the per-signal
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`,
`OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER` (`none` turns a signal off; metrics may list
`otlp,prometheus` for a scrape endpoint too, `shared.telemetry.prometheus`).
The SDK itself reads `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_BSP_*`, `OTEL_METRIC_EXPORT_INTERVAL`,
`OTEL_EXPORTER_OTLP_HEADERS`, `..._INSECURE`, `..._TIMEOUT` and `OTEL_PROPAGATORS`.

Without an endpoint (or, for metrics, a scrape endpoint) a signal stays on the API's no-op
provider: nothing is exported, started, logged or warned about.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import MeterProvider, NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NoOpTracerProvider, TracerProvider

from shared.telemetry.prometheus import DEFAULT_HOST, DEFAULT_PORT, ScrapeEndpoint, start_scrape_endpoint

log = logging.getLogger(__name__)

_TRUE = frozenset({"true", "1", "yes", "on"})


@dataclass(frozen=True)
class Telemetry:
    """The providers one process exports with; `shutdown()` flushes and stops them."""

    service_name: str
    """`service.name` of the resource (OTEL_SERVICE_NAME wins over the per-service default)."""
    tracer_provider: TracerProvider
    """An SDK provider when traces are exported, else the API's no-op provider."""
    meter_provider: MeterProvider
    """An SDK provider when metrics are exported, else the API's no-op provider."""
    traces_enabled: bool
    metrics_enabled: bool
    scrape: ScrapeEndpoint | None = None
    """The Prometheus scrape endpoint, when one was asked for."""

    def shutdown(self) -> None:
        """Export everything still buffered and stop the exporters; safe to call twice."""
        if isinstance(self.tracer_provider, SdkTracerProvider):
            self.tracer_provider.force_flush()
            self.tracer_provider.shutdown()
        if isinstance(self.meter_provider, SdkMeterProvider):
            self.meter_provider.force_flush()
            self.meter_provider.shutdown()
        if self.scrape is not None:
            self.scrape.close()

    async def ashutdown(self) -> None:
        """`shutdown()` off the event loop (a closer for `ServiceHost`)."""
        await asyncio.to_thread(self.shutdown)


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _exporters(signal: str) -> set[str]:
    """`OTEL_<signal>_EXPORTER` as a set (unset: `otlp`)."""
    named = {name.strip().lower() for name in _env(f"OTEL_{signal}_EXPORTER").split(",") if name.strip()}
    return (named or {"otlp"}) - {"none"}


def _signal_endpoint(signal: str) -> str:
    """The OTLP/gRPC endpoint for `signal` (`TRACES` / `METRICS`), or "" when it is off."""
    if "otlp" not in _exporters(signal):
        return ""
    return _env(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")


def _scrape_endpoint() -> ScrapeEndpoint | None:
    if "prometheus" not in _exporters("METRICS"):
        return None
    host = _env("OTEL_EXPORTER_PROMETHEUS_HOST") or DEFAULT_HOST
    return start_scrape_endpoint(host, int(_env("OTEL_EXPORTER_PROMETHEUS_PORT") or DEFAULT_PORT))


def telemetry_disabled() -> bool:
    return _env("OTEL_SDK_DISABLED").lower() in _TRUE


def setup_telemetry(service_name: str, *, install_global: bool = True) -> Telemetry:
    """Build the providers for `service_name` from the environment.

    With `install_global` (the default, what `main` does) they become the process-wide
    providers, so the engine's interceptors, transport and `metrics` helpers use them.
    """
    name = _env("OTEL_SERVICE_NAME") or service_name
    traces_endpoint = "" if telemetry_disabled() else _signal_endpoint("TRACES")
    metrics_endpoint = "" if telemetry_disabled() else _signal_endpoint("METRICS")
    scrape = None if telemetry_disabled() else _scrape_endpoint()
    metrics_on = bool(metrics_endpoint) or scrape is not None
    tracer_provider: TracerProvider = NoOpTracerProvider()
    meter_provider: MeterProvider = NoOpMeterProvider()
    if traces_endpoint or metrics_on:
        resource = Resource.create({SERVICE_NAME: name})
        if traces_endpoint:
            tracer_provider = _sdk_tracer_provider(resource, traces_endpoint)
        if metrics_on:
            meter_provider = _sdk_meter_provider(resource, metrics_endpoint, scrape)
    if install_global:
        if traces_endpoint:
            trace.set_tracer_provider(tracer_provider)
        if metrics_on:
            metrics.set_meter_provider(meter_provider)
    if traces_endpoint or metrics_on:
        log.info(
            "telemetry: service.name=%s traces=%s metrics=%s%s",
            name,
            traces_endpoint or "off",
            metrics_endpoint or "off",
            f", scrape :{scrape.port}/metrics" if scrape else "",
        )
    return Telemetry(
        service_name=name,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        traces_enabled=bool(traces_endpoint),
        metrics_enabled=metrics_on,
        scrape=scrape,
    )


def _sdk_tracer_provider(resource: Resource, endpoint: str) -> SdkTracerProvider:
    provider = SdkTracerProvider(resource=resource)  # sampler from OTEL_TRACES_SAMPLER(_ARG)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))  # OTEL_BSP_*
    return provider


def _sdk_meter_provider(resource: Resource, endpoint: str, scrape: ScrapeEndpoint | None) -> SdkMeterProvider:
    readers: list[MetricReader] = []
    if endpoint:  # the export interval comes from OTEL_METRIC_EXPORT_INTERVAL
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint)))
    if scrape is not None:
        readers.append(scrape.reader)
    return SdkMeterProvider(resource=resource, metric_readers=readers)
