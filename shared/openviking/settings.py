"""Client settings: per-call-kind timeouts, retry policy and connection pool limits."""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass


class CallKind(enum.Enum):
    """What a call does; selects its default timeout."""

    PROBE = "probe"
    """`/health`, `/ready`, `system/status`."""
    READ = "read"
    """Session/task/context/archive/content/fs reads."""
    APPEND = "append"
    """Adding messages, creating/deleting sessions, tags, mkdir/rm, content writes that do not wait
    for processing (`wait=false`: answered in tens of milliseconds)."""
    SEARCH = "search"
    """find/search/grep (one query embedding plus a vector lookup)."""
    COMMIT = "commit"
    """Commit phase 1 (runs under a 30 s server-side lock)."""
    CONTENT_WRITE = "content_write"
    """content/write and batch-write with `wait=true`: can block for minutes when embedding is down."""
    ADMIN = "admin"
    """Account/user provisioning (the first request for a new account can take 2-23 s)."""


def write_kind(*, wait: bool) -> CallKind:
    """A content write waits for embedding only with `wait`; without it, it is a small write."""
    return CallKind.CONTENT_WRITE if wait else CallKind.APPEND


@dataclass(frozen=True, slots=True)
class CallTimeouts:
    """Default timeout in seconds per call kind; each call is further capped by its deadline."""

    probe: float = 2.0
    """Health/readiness probes."""
    read: float = 10.0
    """Reads of sessions, tasks, context, archives, content and fs."""
    append: float = 10.0
    """Message appends and small writes."""
    search: float = 10.0
    """Semantic find/search and grep."""
    commit: float = 40.0
    """Commit phase 1 (server lock timeout is 30 s)."""
    content_write: float = 150.0
    """content/write and batch-write with `wait=true` (it blocked 134 s when embedding was down)."""
    admin: float = 60.0
    """Admin provisioning calls."""

    def for_kind(self, kind: CallKind) -> float:
        return float(getattr(self, kind.value))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter, applied only to idempotent calls."""

    max_attempts: int = 4
    """Attempts in total (1 = never retry)."""
    initial_backoff: float = 0.05
    """Upper bound of the first sleep in seconds."""
    max_backoff: float = 1.0
    """Cap of any single sleep in seconds."""
    multiplier: float = 2.0
    """Growth of the sleep bound per attempt."""
    retry_on_http_status: frozenset[int] = frozenset({502, 503})
    """HTTP statuses worth another attempt; connection errors (status 0) always are."""

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Sleep before attempt `attempt + 1` (attempt counts from 1): uniform in [0, bound]."""
        bound = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return (rng or random).uniform(0.0, bound)


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """Connection pool to one OpenViking server (`shared.openviking.http.HttpSession`)."""

    max_connections: int = 100
    """Concurrent connections to OpenViking (idle ones are kept open up to this many)."""
    keepalive_expiry: float = 4.0
    """Seconds an idle connection is kept; must stay below the server's 5 s keep-alive."""
