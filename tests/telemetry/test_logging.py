from __future__ import annotations

import io
import logging

from opentelemetry import trace

from shared.telemetry import TraceContextFilter, install_log_correlation
from shared.telemetry.logging import NO_SPAN_ID, NO_TRACE_ID

from .conftest import Spans


def _capture_logger(name: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    logger = logging.getLogger(name)
    logger.propagate = False
    logger.handlers = [logging.StreamHandler(stream)]
    logger.setLevel(logging.INFO)
    install_log_correlation(logger)
    install_log_correlation(logger)  # idempotent
    return logger, stream


def test_records_carry_trace_and_span_ids(spans: Spans) -> None:
    provider, _ = spans
    logger, stream = _capture_logger("tests.telemetry.correlated")
    assert sum(isinstance(f, TraceContextFilter) for f in logger.handlers[0].filters) == 1
    with provider.get_tracer("t").start_as_current_span("turn") as span:
        logger.info("inside")
    logger.info("outside")
    trace_id = trace.format_trace_id(span.get_span_context().trace_id)
    span_id = trace.format_span_id(span.get_span_context().span_id)
    inside, outside = stream.getvalue().splitlines()
    assert f"trace_id={trace_id} span_id={span_id}" in inside and inside.endswith("inside")
    assert f"trace_id={NO_TRACE_ID} span_id={NO_SPAN_ID}" in outside


def test_filter_sets_record_fields(spans: Spans) -> None:
    provider, _ = spans
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    with provider.get_tracer("t").start_as_current_span("turn") as span:
        assert TraceContextFilter().filter(record)
    assert record.__dict__["trace_id"] == trace.format_trace_id(span.get_span_context().trace_id)
    assert record.__dict__["span_id"] == trace.format_span_id(span.get_span_context().span_id)
