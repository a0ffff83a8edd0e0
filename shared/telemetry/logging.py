"""Log correlation: every record carries the current `trace_id` and `span_id`.

`install_log_correlation()` adds `TraceContextFilter` to the root logger's handlers and sets
their format to `LOG_FORMAT` (which prints both ids). Records outside a span get all-zero ids.
"""

from __future__ import annotations

import logging

from opentelemetry import trace

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [trace_id=%(trace_id)s span_id=%(span_id)s] %(message)s"
NO_TRACE_ID = "0" * 32
NO_SPAN_ID = "0" * 16


class TraceContextFilter(logging.Filter):
    """Adds `trace_id` (32 hex) and `span_id` (16 hex) of the current span to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = trace.format_trace_id(span_context.trace_id)
            record.span_id = trace.format_span_id(span_context.span_id)
        else:
            record.trace_id = NO_TRACE_ID
            record.span_id = NO_SPAN_ID
        return True


def install_log_correlation(logger: logging.Logger | None = None, *, fmt: str = LOG_FORMAT) -> None:
    """Add the filter and format to every handler of `logger` (the root logger by default);
    idempotent. Call after `logging.basicConfig`."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(existing, TraceContextFilter) for existing in handler.filters):
            handler.addFilter(TraceContextFilter())
        handler.setFormatter(logging.Formatter(fmt))
