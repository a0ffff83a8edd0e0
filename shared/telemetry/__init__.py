"""Telemetry for the engine: OTLP traces and metrics configured by `OTEL_*`, W3C propagation
over gRPC and into OpenViking, metric recording helpers and log correlation.

Services use `shared.telemetry.attributes` (span attributes) and `shared.telemetry.metrics`
(recording functions); the runtime uses the rest.
"""

from shared.telemetry.logging import TraceContextFilter, install_log_correlation
from shared.telemetry.setup import Telemetry, setup_telemetry
from shared.telemetry.tracing import (
    FINALISE_SPAN_NAME,
    OpenVikingTracing,
    TracingClientInterceptor,
    TracingServerInterceptor,
    client_interceptors,
    current_traceparent,
    engine_tracer,
    finalisation_span,
    link_from_traceparent,
    openviking_route,
    trace_headers,
)

__all__ = [
    "FINALISE_SPAN_NAME",
    "OpenVikingTracing",
    "Telemetry",
    "TraceContextFilter",
    "TracingClientInterceptor",
    "TracingServerInterceptor",
    "client_interceptors",
    "current_traceparent",
    "engine_tracer",
    "finalisation_span",
    "install_log_correlation",
    "link_from_traceparent",
    "openviking_route",
    "setup_telemetry",
    "trace_headers",
]
