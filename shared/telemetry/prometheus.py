"""The Prometheus scrape endpoint: the engine's metrics at `http://HOST:PORT/metrics`.

On when `OTEL_METRICS_EXPORTER` lists `prometheus` (e.g. `otlp,prometheus`); the address comes
from the standard `OTEL_EXPORTER_PROMETHEUS_HOST` / `OTEL_EXPORTER_PROMETHEUS_PORT` (defaults
`localhost:9464`; a pod sets `0.0.0.0`). It is how a HorizontalPodAutoscaler reads capture's
background queue depth (through a metrics adapter, see k8s/README.md): OTLP pushes to a
collector, an autoscaler's adapter pulls from Prometheus.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry, start_http_server

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 9464


@dataclass(frozen=True)
class ScrapeEndpoint:
    reader: PrometheusMetricReader
    """The meter provider's reader that the endpoint serves."""
    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_scrape_endpoint(host: str, port: int) -> ScrapeEndpoint:
    """Serve a fresh registry (one per provider: a process may set telemetry up more than once)."""
    registry = CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(registry=registry)
    server, thread = start_http_server(port, addr=host, registry=registry)
    return ScrapeEndpoint(reader, server, thread)
