"""The caller's gRPC deadline as an absolute `time.monotonic()` value for backend calls."""

from __future__ import annotations

import time
from typing import Any

from grpc import aio


def call_deadline(
    context: aio.ServicerContext[Any, Any], default_seconds: float | None = None
) -> float | None:
    """When this call must be done: the caller's deadline, else `default_seconds` from now
    (None: no deadline, each backend call keeps its own timeout)."""
    remaining = context.time_remaining()
    if remaining is None:
        return None if default_seconds is None else time.monotonic() + default_seconds
    return time.monotonic() + remaining
