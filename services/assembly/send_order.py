"""The order in which an Assemble's requests reach OpenViking, and its own CPU work around them.

OpenViking serves one request at a time on this machine's cores, and recall's `find` is the
longest call: it embeds the query (in the embedding server, OpenViking waiting), then searches
its vectors. So:

1. recall's `find` goes out first (`after_recall_sends` holds the summaries' and the profile's
   reads one step behind it; OpenViking would otherwise serve them first);
2. those reads go out next, before any CPU work of the Assemble's own: they land while the query
   is being embedded. The exchange index's search (~2 ms of CPU at 10,000 stored exchanges) once
   ran before them, and the reads it held back landed during the `find`'s vector search instead,
   ~2 ms more on every `find` of a new session (A/B in one process, 60 questions x 2 rounds:
   Assemble 1.37x one `find` with the search first, 1.27-1.29x with the reads first);
3. the Assemble's CPU work (the exchange index's search, the host transcript) runs while
   OpenViking answers (`requests_out`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

SEND_STEPS = 2
"""Event-loop steps the tasks just started take to send their requests: retrieval's and the
sources' tasks take their first steps, then the tasks those start (recall's find and grep)."""


async def requests_out() -> None:
    """Yield until what was just started has sent its requests, before the caller's CPU work
    delays them. Each yield lets every task ready before it run one step (asyncio's ready queue
    is first in, first out)."""
    for _ in range(SEND_STEPS):
        await asyncio.sleep(0)


async def after_recall_sends(call: Awaitable[T]) -> T:
    """`call`, one step after recall's first: recall's `find` goes out before the summaries' and
    the profile's reads."""
    await asyncio.sleep(0)
    return await call
