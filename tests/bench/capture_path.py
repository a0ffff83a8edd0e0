"""Capture path latency: AfterTurn and CommitTurn beside OpenViking's own batch append (issue 16).

`python -m tests.bench.capture_path [--sessions 6 --turns 25] [--pause-ms 0] [--embeddings-url URL]`
starts a private OpenViking (extraction off; its own embedding server unless one is given) and capture +
compaction in this process, then plays the same seeded sessions three ways, turn by turn
interleaved so that all three share the machine's load:

- engine AfterTurn: the whole transcript so far (the engine persists the new messages);
- engine CommitTurn: only the turn's messages, with its advancement key;
- OpenViking alone: `POST /api/v1/sessions/{id}/messages/batch` of the same turn's messages in
  the same envelope the engine writes (one request, what the engine's append costs by itself).

The three go in all six orders in turn (by turn and session), so that each follows each of the
others about equally often: an engine call's background writes (append, release, turn index)
slow down whichever call comes next, and a fixed or merely rotated order would charge them to
the same way (with a rotation, CommitTurn always came right after AfterTurn). Sessions take
turns round robin: a stream's next turn comes after one turn of every other session, as a
host's next turn comes after a model call. (Back to back, a stream's next claim waits for the
previous turn's append, which follows the answer: docs/benchmarks.md has those numbers.)

With `--pause-ms`, every call is followed by that much idle time, as a host's model call follows
its turn: the engine's writes after the answer (append, release, turn index) then land in that
time instead of on the next call, and the table compares what a host waits for on a quiet
OpenViking. Without it the calls come back to back and each way carries the others' writes.

Every session has its own stream, so each turn is capture's steady path (no contention, no
trigger: the thresholds are set out of reach); a session's first turn, which creates its
stream state, is left out of the table. The OpenViking calls per RPC come from a counting
transport on the engine's client: *waited* are the calls answered before the RPC was, *all*
adds the ones written after it (release, turn index) before the stream's next call.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field

import httpx
from contextengine.v1 import capture_pb2, capture_pb2_grpc, common_pb2
from grpc import aio

from services.capture import build_capture_service
from services.compaction import build_compaction_service
from shared.config import load_settings
from shared.domain.envelope import openviking_message
from shared.domain.identity import parse_identity
from shared.runtime.context import ServiceContext, build_openviking_client
from shared.runtime.server import ServiceHost
from shared.tokens import ensure_offline_tiktoken
from tests.bench.common import turn_messages
from tests.bench.workload import Session, Turn, generate
from tests.support.call_log import CallLog
from tests.support.private_stack import private_stack

ACCOUNT = "capbench"
AGENT = "main"
OUT_OF_REACH = {
    "compactTurnThreshold": 1_000_000,
    "compactTokensAddedThreshold": 1_000_000_000,
    "compactIntervalMinutes": 1_000_000,
    "defaultTokenBudget": 1_000_000_000,
}
"""No compaction trigger fires: every turn is the steady path."""


@dataclass
class Series:
    """One way of storing the turns: latencies (ms) and, for the engine, the OpenViking calls of
    each call counted on its own capture host's client (`log`)."""

    name: str
    log: CallLog | None = None
    latencies: list[float] = field(default_factory=list)
    waited: list[int] = field(default_factory=list)
    total: list[int] = field(default_factory=list)
    _last: tuple[float, float, int] | None = None
    """The previous call (started, answered, its first request), counted once the next starts."""

    async def time(self, call: Awaitable[object], *, steady: bool) -> None:
        first = self.log.mark() if self.log else 0
        self.close_previous(first)
        started = time.perf_counter()
        await call
        answered = time.perf_counter()
        self.latencies += [(answered - started) * 1000] if steady else []
        self._last = (started, answered, first) if steady else None

    def close_previous(self, until: int) -> None:
        """Count the previous call's requests: answered before it was, and all it caused (its
        release and turn index are written after it answered, until this host's next call)."""
        if self.log is None or self._last is None:
            return
        _, answered, first = self._last
        calls = self.log.calls[first:until]
        self.waited.append(sum(1 for c in calls if c.finished is not None and c.finished <= answered))
        self.total.append(len(calls))
        self._last = None


ORDERS = list(itertools.permutations(("after", "commit", "append")))
"""Every order of the three ways; a turn uses the one at (turn index + session position)."""


async def start_capture(base_url: str, log: CallLog) -> ServiceHost:
    """Capture + compaction in this process (as `--service all` runs them), counted by `log`."""
    settings = load_settings(environ={}, overrides={"baseUrl": base_url, "grpcPort": 0, **OUT_OF_REACH})
    ov = build_openviking_client(settings, middlewares=[log])
    host_ref: list[ServiceHost] = []
    context = ServiceContext(settings=settings, openviking=ov, compaction_target=lambda: host_ref[0].address)
    host = ServiceHost(
        settings, [build_capture_service(context), build_compaction_service(context)], closers=[ov.aclose]
    )
    host_ref.append(host)
    await host.start(0)
    return host


@dataclass
class _Stream:
    """One seeded session played three ways: its engine identities, raw session and transcript."""

    session: Session
    after: common_pb2.Identity
    commit: common_pb2.Identity
    stream_id: str
    raw_session: str
    headers: dict[str, str]
    position: int
    """The stream's place in the round robin."""
    transcript: list[common_pb2.ConversationMessage] = field(default_factory=list)

    @classmethod
    def of(cls, session: Session, run: str, position: int) -> _Stream:
        user = f"{session.user_id}-{run}"
        after, commit = (
            common_pb2.Identity(
                account_id=ACCOUNT,
                user_id=user,
                agent_id=AGENT,
                session_id=f"{kind}-{session.session_id}-{run}",
            )
            for kind in ("after", "commit")
        )
        return cls(
            session=session,
            after=after,
            commit=commit,
            stream_id=parse_identity(after, default_agent_id=AGENT, session_required=True).stream_id,
            raw_session=f"ce-raw-{session.session_id}-{run}",
            headers={"X-OpenViking-Account": ACCOUNT, "X-OpenViking-User": user},
            position=position,
        )


@dataclass
class _Ways:
    """The three ways a turn is stored, each timed into its series."""

    after: Series
    commit: Series
    append: Series
    after_stub: capture_pb2_grpc.CaptureServiceStub
    commit_stub: capture_pb2_grpc.CaptureServiceStub
    http: httpx.AsyncClient
    pause: float = 0.0
    """Idle seconds after every call (a host's model call)."""

    async def play(self, stream: _Stream, turn: Turn) -> None:
        user_message, rest = turn_messages(turn, stream.session.session_id)
        messages = [user_message, *rest]
        pre = len(stream.transcript)
        stream.transcript.extend(messages)
        steady = turn.index > 0
        body = [openviking_message(stream.stream_id, pre + i, m).to_body() for i, m in enumerate(messages)]
        for way in ORDERS[(turn.index + stream.position) % len(ORDERS)]:
            if way == "after":
                request = capture_pb2.AfterTurnRequest(
                    identity=stream.after, messages=stream.transcript, pre_prompt_message_count=pre
                )
                await self.after.time(self.after_stub.AfterTurn(request, timeout=60), steady=steady)
            elif way == "commit":
                fenced_turn = capture_pb2.CommitTurnRequest(
                    identity=stream.commit, messages=messages, advancement_key=f"turn-{turn.index}"
                )
                await self.commit.time(self.commit_stub.CommitTurn(fenced_turn, timeout=60), steady=steady)
            else:
                raw = raw_append(self.http, stream.raw_session, stream.headers, body)
                await self.append.time(raw, steady=steady)
            if self.pause:
                await asyncio.sleep(self.pause)


async def measure(base_url: str, sessions: int, turns: int, seed: int, pause: float = 0.0) -> list[Series]:
    after = Series("engine AfterTurn (whole transcript)", CallLog())
    commit = Series("engine CommitTurn (the turn)", CallLog())
    append = Series("OpenViking batch append (the turn)")
    assert after.log is not None and commit.log is not None
    hosts = [await start_capture(base_url, after.log), await start_capture(base_url, commit.log)]
    run = uuid.uuid4().hex[:6]
    try:
        async with (
            aio.insecure_channel(hosts[0].address) as after_channel,
            aio.insecure_channel(hosts[1].address) as commit_channel,
            httpx.AsyncClient(base_url=base_url, timeout=60) as http,
        ):
            after_stub = capture_pb2_grpc.CaptureServiceStub(after_channel)
            commit_stub = capture_pb2_grpc.CaptureServiceStub(commit_channel)
            played = generate(sessions, turns, seed).sessions
            streams = [_Stream.of(session, run, position) for position, session in enumerate(played)]
            ways = _Ways(after, commit, append, after_stub, commit_stub, http, pause)
            for index in range(max(len(stream.session.turns) for stream in streams)):
                for stream in streams:  # round robin: a stream's next turn comes after all others'
                    if index < len(stream.session.turns):
                        await ways.play(stream, stream.session.turns[index])
            await asyncio.sleep(1.0)  # the last turns' releases and index writes
            after.close_previous(after.log.mark())
            commit.close_previous(commit.log.mark())
    finally:
        for host in hosts:
            await host.stop()
    return [after, commit, append]


async def raw_append(
    http: httpx.AsyncClient, session_id: str, headers: dict[str, str], messages: list[dict[str, object]]
) -> None:
    """One `messages/batch` request, as the engine's append sends it."""
    response = await http.post(
        f"/api/v1/sessions/{session_id}/messages/batch", json={"messages": messages}, headers=headers
    )
    response.raise_for_status()


def quantiles(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), statistics.quantiles(values, n=20)[18]


def table(series: list[Series]) -> str:
    """Markdown table; the last series is the baseline the p50 ratio is taken against."""
    baseline = quantiles(series[-1].latencies)[0]
    rows = [
        "| path | n | p50 ms | p95 ms | p50 / OpenViking append | OpenViking calls/RPC: waited | all |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for one in series:
        p50, p95 = quantiles(one.latencies)
        waited = f"{statistics.mean(one.waited):.2f}" if one.waited else "1"
        total = f"{statistics.mean(one.total):.2f}" if one.total else "1"
        cells = [one.name, str(len(one.latencies)), f"{p50:.1f}", f"{p95:.1f}", f"{p50 / baseline:.2f}"]
        rows.append("| " + " | ".join([*cells, waited, total]) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embeddings-url", default=None, help="reuse this embedding server (.../v1)")
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--pause-ms", type=float, default=0.0, help="idle time after every call")
    args = parser.parse_args()
    ensure_offline_tiktoken()
    with private_stack(args.embeddings_url) as stack:
        series = asyncio.run(
            measure(stack.openviking_url, args.sessions, args.turns, args.seed, args.pause_ms / 1000)
        )
    pacing = f"{args.pause_ms:g} ms idle after every call" if args.pause_ms else "back to back"
    steady = f"{args.sessions} sessions x {args.turns - 1} steady turns"
    print(f"capture path: {steady}, 1 caller, interleaved, {pacing}")
    print(table(series))


if __name__ == "__main__":
    main()
