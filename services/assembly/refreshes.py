"""Loads a replica runs again in the background, after the call that found its copy aged.

A cache that may show what it holds past its TTL (stale-while-revalidate: `TenantCache`'s stale
window, the `SkillCatalogue`) starts the load again here: once the call that asked has been
answered (`after_answer`, so that the load does not compete with that call's own requests), one
load per key at a time; a failed load is logged and leaves the copy as it was, for the next call
to try again. Shutdown stops what is still running (`aclose`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from shared.runtime.answer_first import after_answer

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class Refreshes(Generic[K]):
    """Background loads by key, one at a time per key."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._running: dict[K, asyncio.Task[None]] = {}

    def start(self, key: K, load: Callable[[], Awaitable[object]]) -> None:
        """Run `load` once the current call is answered, unless one for `key` is running."""
        if key in self._running:
            return

        async def run() -> None:
            try:
                await after_answer()
                await load()
            except Exception as exc:  # the copy stays as it was; the next call tries again
                log.info("%s %s not loaded again: %s: %s", self._what, key, type(exc).__name__, exc)
            finally:
                del self._running[key]

        self._running[key] = asyncio.create_task(run(), name=f"refresh {self._what}")

    async def aclose(self) -> None:
        """Stop the loads still running (at shutdown, before the client closes)."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
