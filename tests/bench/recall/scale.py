"""Latency at scale: Assemble next to one plain OpenViking `find` for a user with N stored exchanges.

Storing N exchanges through AfterTurn costs one RPC (and one embedding) each: 10,000 of them
take longer than the rest of the bench. The phase therefore batch-writes the documents capture
would have written, in the engine's own turn-index format (`shared.domain.turn_index`:
`turn_documents` / `write_operations`, the same URIs, tags and processing mode), straight into
OpenViking, then waits for OpenViking to embed them. What Assemble reads is what a user with N
captured exchanges has; only the capture path is skipped.

The `find` is the one recall makes: the question, over the user's memories, the same candidate
limit, no score threshold. Each question is asked in a new session twice: the first call (the
replica reads the new stream's state beside the `find` unless its exchange index's listing, at
most 30 s old, vouches that the stream has none) and the next call of the same session (as a
host calls on: OpenClaw assembles twice before its first model request; the stream's state is
then known). All are timed one at a time (1 caller), interleaved, once the
assembly replica has indexed the user's exchanges (`INDEX_SYNC_WAIT_S_PER_EXCHANGE` after the first question:
its first sync greps every session folder, and while it runs OpenViking answers every `find`
about twice as slowly, the timed one as well as Assemble's).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from services.assembly.recall import TURN_CANDIDATES, USER_MEMORIES_URI
from shared.domain.turn_index import (
    TURN_INDEX_ROOT,
    TURN_PROCESSING_MODE,
    IndexedMessage,
    turn_documents,
    write_operations,
)
from tests.bench.recall.dataset import Question
from tests.bench.recall.hard_dataset import EXCHANGES_PER_SESSION, generate_hard
from tests.bench.recall.replay import Asked, Stubs, ask, openviking_headers, openviking_quiet, transcript
from tests.bench.recall.scoring import p50_ms

WRITE_BATCH = 250
"""Documents per batch-write."""
WRITE_TIMEOUT_S = 600.0
INDEX_SYNC_WAIT_S_PER_EXCHANGE = 0.003
"""How long the phase waits after its first question, per stored exchange, for the assembly
replica's exchange index to take up the user's exchanges (`exchange_index`; 10,000 of them took a
few seconds of the 30 this gives)."""
EMBEDDED_DEADLINE_S = 4 * 3600.0
"""How long the phase waits for OpenViking to embed what it stored (10,000 documents took longer
than 10 minutes on the shared 2-core machine)."""


@dataclass(frozen=True)
class ScaleResult:
    exchanges: int
    store_seconds: float
    assemble_p50_ms: float
    """A new session's first call."""
    next_call_p50_ms: float
    """The same session's next call."""
    find_p50_ms: float

    def as_report(self) -> dict[str, float]:
        return {
            "stored_exchanges": self.exchanges,
            "store_seconds": round(self.store_seconds, 1),
            "assemble_p50_ms": self.assemble_p50_ms,
            "next_call_p50_ms": self.next_call_p50_ms,
            "find_p50_ms": self.find_p50_ms,
            "assemble_over_find": self._over_find(self.assemble_p50_ms),
            "next_call_over_find": self._over_find(self.next_call_p50_ms),
        }

    def _over_find(self, ms: float) -> float:
        return round(ms / self.find_p50_ms, 2) if self.find_p50_ms else 0.0


async def _post(http: httpx.AsyncClient, path: str, user_id: str, body: dict[str, object]) -> None:
    response = await http.post(path, headers=openviking_headers(user_id), json=body, timeout=WRITE_TIMEOUT_S)
    response.raise_for_status()


async def store_exchanges(http: httpx.AsyncClient, user_id: str, exchanges: int, seed: int) -> float:
    """Write `exchanges` hard-tier exchanges as turn-index documents; seconds until embedded."""
    sessions = -(-exchanges // EXCHANGES_PER_SESSION)
    (conversation,) = generate_hard(seed=seed, users=1, sessions=sessions)
    operations: list[dict[str, object]] = []
    for script in conversation.sessions:
        messages = [IndexedMessage(i, m) for i, m in enumerate(transcript(script, len(script.exchanges)))]
        operations += write_operations(
            turn_documents(f"scale-{script.session_id}", messages, datetime.now(UTC))
        )
    started = time.perf_counter()
    with contextlib.suppress(httpx.HTTPStatusError):  # the folder already exists
        await _post(http, "/api/v1/fs/mkdir", user_id, {"uri": TURN_INDEX_ROOT})
    for start in range(0, exchanges, WRITE_BATCH):
        body = {
            "root_uri": TURN_INDEX_ROOT,
            "operations": operations[start : min(start + WRITE_BATCH, exchanges)],
            "wait": False,
            "processing_mode": TURN_PROCESSING_MODE,
        }
        await _post(http, "/api/v1/content/batch-write", user_id, body)
    await openviking_quiet(http, user_id, give_up_s=EMBEDDED_DEADLINE_S)
    return time.perf_counter() - started


async def find_seconds(http: httpx.AsyncClient, user_id: str, query: str) -> float:
    body = {"query": query, "target_uri": USER_MEMORIES_URI, "limit": TURN_CANDIDATES, "score_threshold": 0.0}
    started = time.perf_counter()
    headers = openviking_headers(user_id)
    response = await http.post("/api/v1/search/find", headers=headers, json=body, timeout=60)
    response.raise_for_status()
    return time.perf_counter() - started


def _question(text: str) -> Question:
    return Question("latency", text, "", ())


async def latency_at_scale(
    stubs: Stubs, openviking_url: str, user_id: str, *, exchanges: int, questions: Sequence[str], seed: int
) -> ScaleResult:
    """Store `exchanges` for `user_id`, then time Assemble and find for each of `questions`."""
    async with httpx.AsyncClient(base_url=openviking_url) as http:
        store = await store_exchanges(http, user_id, exchanges, seed)
        for text in questions[:1]:  # warm-up: the first call of a user sets up caches on both sides
            await ask(stubs, Asked(user_id, "scale-warm", [], "new"), _question(text), 4000)
            await find_seconds(http, user_id, text)
        await asyncio.sleep(exchanges * INDEX_SYNC_WAIT_S_PER_EXCHANGE)
        firsts: list[float] = []
        nexts: list[float] = []
        finds: list[float] = []
        for i, text in enumerate(questions):
            where = Asked(user_id, f"scale-q{i}", [], "new")
            firsts.append((await ask(stubs, where, _question(text), 4000)).seconds)
            nexts.append((await ask(stubs, where, _question(text), 4000)).seconds)
            finds.append(await find_seconds(http, user_id, text))
    return ScaleResult(exchanges, store, p50_ms(firsts), p50_ms(nexts), p50_ms(finds))
