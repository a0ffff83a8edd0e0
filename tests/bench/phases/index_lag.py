"""Turn-index lag: how long after AfterTurn answers an exchange is findable by recall (issue 33).

Two parts, each replaying the workload's sessions (fresh session ids) as a host does (Assemble,
then AfterTurn, per turn):

- *burst*: every session at once at `--lag-burst` callers, back to back (the capture replica's
  index queue and OpenViking's embedding queue fill up);
- *after the burst*: right after, `AFTER_BURST_SESSIONS` sessions one after the other, turn by
  turn with a host's pause between turns, every turn probed (the queues drain: does the lag come
  back down, and how fast?).

In the burst every `--lag-sample`-th turn is probed: from AfterTurn's answer, a `search/find` of the turn's
user text over that session's index folder, again after `PROBE_SECONDS` growing by half each
time (so that probing does not add much load to what it measures), until the exchange's document
is among the hits (`PROBE_GIVE_UP_SECONDS` at most: then it is counted as not found). The lag
includes capture's batch window (`turnIndexCoalesceMs`) by design: recall of the session the
host is in reads its transcript, not the index.

An exchange not found by then is looked for once more `RECHECK_AFTER_SECONDS` after its turn was
answered: a turn-index write that failed leaves its range unconfirmed in the stream's state, and
capture writes it again once it is `turnIndexRecoverAfterMs` old (60 s) when the stream is next
called or, quiet, swept (`services/capture/outbox_sweep.py`). Reported: how many of the lost
were found then, and how many were still not written.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from contextengine.v1 import common_pb2

from shared.config import Settings
from shared.domain.turn_index import session_index_uri, turn_uri
from tests.bench.common import (
    Stubs,
    after_turn_request,
    assemble_request,
    identity,
    ov_call,
    percentile,
    rounded,
    run_pool,
    turn_messages,
)
from tests.bench.workload import Session, Workload

PROBE_SECONDS = 0.2
PROBE_MAX_SECONDS = 2.0
PROBE_GIVE_UP_SECONDS = 60.0
PROBE_LIMIT = 50
"""Hits per probe: a session's folder holds at most a few dozen exchanges here."""
RECHECK_AFTER_SECONDS = 150.0
"""When a lost exchange is looked for again: past the recovery age (60 s), the quiet-stream
sweep's wait (35 s) and its period (10 s), with room for the write and its embedding."""
AFTER_BURST_PAUSE_SECONDS = 0.5
"""The host's pause between two turns after the burst."""
AFTER_BURST_SESSIONS = 3


@dataclass(frozen=True)
class Probe:
    """A sampled turn: its user, what to find, its document, when AfterTurn answered."""

    user: str
    query: str
    uri: str
    answered: float
    turn: int


@dataclass
class LagPart:
    lags: list[float] = field(default_factory=list)
    by_turn: dict[int, float] = field(default_factory=dict)
    """Lag by the probed turn's position in the part (for the last session's lags)."""
    lost: int = 0
    unwritten: int = 0
    """Of `lost`: no document at the exchange's URI when the probe gave up."""
    errors: int = 0
    """Turns whose RPC failed (not probed)."""
    probes: list[asyncio.Task[None]] = field(default_factory=list)
    lost_probes: list[Probe] = field(default_factory=list)
    recovered: int = 0
    """Of `lost`: findable when looked for again after the recovery window."""
    unwritten_after_recovery: int = 0
    """Of `lost`: still no document at the exchange's URI then."""

    def summary(self) -> dict[str, Any]:
        return {
            "sampled": len(self.lags) + self.lost,
            "rpc_errors": self.errors,
            "not_found": self.lost,
            "not_written": self.unwritten,
            "found_after_recovery": self.recovered,
            "not_written_after_recovery": self.unwritten_after_recovery,
            "p50_s": rounded(percentile(self.lags, 50)) if self.lags else None,
            "p95_s": rounded(percentile(self.lags, 95)) if self.lags else None,
            "p99_s": rounded(percentile(self.lags, 99)) if self.lags else None,
            "max_s": rounded(max(self.lags)) if self.lags else None,
            "last_p50_s": rounded(percentile(self.last, 50)) if self.last else None,
        }

    @property
    def last(self) -> list[float]:
        """The lags of the last third of the probed turns."""
        order = sorted(self.by_turn)
        return (
            [self.by_turn[turn] for turn in order[len(order) - len(order) // 3 :]] if len(order) >= 3 else []
        )


async def _findable(http: httpx.AsyncClient, probe: Probe) -> bool:
    """Whether a find of the turn's text in its session's index folder has its document."""
    folder = session_index_uri(probe.uri.rsplit("/", 2)[-2])
    wanted = probe.uri.split("/memories/", 1)[1]
    body = {"query": probe.query, "target_uri": folder, "limit": PROBE_LIMIT, "score_threshold": 0.0}
    found = await ov_call(http, "POST", "/api/v1/search/find", probe.user, json=body)
    hits = ((found or {}).get("result") or {}).get("memories") or []
    return any(str(hit.get("uri", "")).endswith(wanted) for hit in hits)


async def _written(http: httpx.AsyncClient, probe: Probe) -> bool:
    stat = await ov_call(http, "GET", "/api/v1/fs/stat", probe.user, params={"uri": probe.uri})
    return bool((stat or {}).get("result"))


async def _probe(http: httpx.AsyncClient, probe: Probe, part: LagPart) -> None:
    """Find the turn's text in its session's index folder until its document is a hit."""
    pause = PROBE_SECONDS
    while time.monotonic() - probe.answered < PROBE_GIVE_UP_SECONDS:
        if await _findable(http, probe):
            part.lags.append(time.monotonic() - probe.answered)
            part.by_turn[probe.turn] = part.lags[-1]
            return
        await asyncio.sleep(pause)
        pause = min(PROBE_MAX_SECONDS, pause * 1.5)
    part.lost += 1
    part.lost_probes.append(probe)
    if not await _written(http, probe):
        part.unwritten += 1


async def _recheck(http: httpx.AsyncClient, part: LagPart) -> None:
    """Look for each lost exchange once more, `RECHECK_AFTER_SECONDS` after its turn's answer."""
    for probe in sorted(part.lost_probes, key=lambda p: p.answered):
        await asyncio.sleep(max(0.0, probe.answered + RECHECK_AFTER_SECONDS - time.monotonic()))
        part.recovered += await _findable(http, probe)
        part.unwritten_after_recovery += not await _written(http, probe)


async def _replay(
    stubs: Stubs,
    http: httpx.AsyncClient,
    session: Session,
    session_id: str,
    *,
    args: argparse.Namespace,
    part: LagPart,
    pause: float,
    sample: int,
) -> int:
    """Assemble and AfterTurn turn by turn; every `sample`-th turn probed until findable."""
    ident = identity(session.user_id, session_id)
    transcript: list[common_pb2.ConversationMessage] = []
    for number, turn in enumerate(session.turns):
        before = len(transcript)
        user, rest = turn_messages(turn, session_id)
        try:
            await stubs.assembly.Assemble(
                assemble_request(ident, [*transcript, user], turn.user, args.budget), timeout=args.rpc_timeout
            )
            transcript += [user, *rest]
            answer = await stubs.capture.AfterTurn(
                after_turn_request(ident, transcript, before, args.budget), timeout=args.rpc_timeout
            )
        except grpc.aio.AioRpcError:
            part.errors += 1  # the host would deliver the turn again with its next one
            transcript[before:] = [user, *rest]
            continue
        answered = time.monotonic()
        if number % sample == 0 and answer.persisted_count:
            uri = turn_uri(answer.openviking_session_id, before)
            probe = Probe(session.user_id, turn.user[:400], uri, answered, len(part.probes))
            part.probes.append(asyncio.create_task(_probe(http, probe, part)))
        if pause:
            await asyncio.sleep(pause)
    return len(session.turns)


async def phase_index_lag(
    stubs: Stubs, http: httpx.AsyncClient, workload: Workload, args: argparse.Namespace
) -> dict[str, Any]:
    burst, after = LagPart(), LagPart()

    async def bursting(session: Session) -> int:
        return await _replay(
            stubs,
            http,
            session,
            f"lagb-{session.session_id}",
            args=args,
            part=burst,
            pause=0.0,
            sample=args.lag_sample,
        )

    turns, wall = await run_pool(workload.sessions, args.lag_burst, bursting)
    for calm in workload.sessions[:AFTER_BURST_SESSIONS]:
        await _replay(
            stubs, http, calm, f"laga-{calm.session_id}", args=args, part=after,
            pause=AFTER_BURST_PAUSE_SECONDS, sample=1,
        )  # fmt: skip
    await asyncio.gather(*burst.probes, *after.probes)
    await asyncio.gather(_recheck(http, burst), _recheck(http, after))
    return {
        "burst_callers": args.lag_burst,
        "burst_turns": turns,
        "burst_wall_s": rounded(wall),
        "sample_every": args.lag_sample,
        "coalesce_ms": Settings.model_fields["turn_index_coalesce_ms"].default,
        "burst": burst.summary(),
        "after_burst_sessions": AFTER_BURST_SESSIONS,
        "after_burst": after.summary(),
    }
