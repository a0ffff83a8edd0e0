"""One session growing turn by turn through AfterTurn, and its twin straight into OpenViking."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

import grpc
import httpx
from contextengine.v1 import (
    common_pb2,
)

from shared.domain.messages import message_texts
from shared.tokens import TokenCounter
from tests.bench.common import (
    Recorder,
    Stubs,
    after_turn_request,
    describe_error,
    identity,
    ov_call,
    ov_message_body,
    percentile,
    rounded,
    stats,
    turn_messages,
    turn_plain_messages,
)
from tests.bench.workload import Session, generate


def shortened(session: Session, tool_chars: int) -> Session:
    """The session with tool results cut to `tool_chars` characters (cheaper long sessions)."""
    if tool_chars <= 0:
        return session
    turns = [
        replace(t, tool=replace(t.tool, output=t.tool.output[:tool_chars])) if t.tool is not None else t
        for t in session.turns
    ]
    return replace(session, turns=turns)


def growth_session(args: argparse.Namespace) -> Session:
    session = generate(1, args.growth_turns, args.seed + 1, prefix="grow-").sessions[0]
    return shortened(session, args.growth_tool_chars)


def range_stats(points: list[tuple[int, float]], first: int, last: int) -> dict[str, Any]:
    """Latency stats over the points whose turn number is in [first, last]."""
    chosen = [ms for turn, ms in points if first <= turn <= last]
    out = stats(chosen)
    out["turns"] = f"{first}-{last}"
    return out


def early_late(points: list[tuple[int, float]], window: int = 100) -> dict[str, Any]:
    """Stats at turns 1..window and at the last `window` turns done (900-1000 of 1,000)."""
    if not points:
        return {}
    top = max(turn for turn, _ in points)
    return {
        "early": range_stats(points, 1, window),
        "late": range_stats(points, max(1, top - window + 1), top),
    }


async def phase_growth(stubs: Stubs, args: argparse.Namespace, counter: TokenCounter) -> dict[str, Any]:
    """One session growing turn by turn; AfterTurn latency per turn index."""
    if args.growth_turns <= 0:
        return {}
    session = growth_session(args)
    session_id = f"grow-{args.seed}"
    ident = identity(session.user_id, session_id)
    transcript: list[common_pb2.ConversationMessage] = []
    points: list[tuple[int, float, int]] = []
    errors: list[str] = []
    tokens = 0
    stop_at = time.monotonic() + args.growth_seconds
    wall_start = time.perf_counter()
    for turn in session.turns:
        if time.monotonic() > stop_at:
            break
        before = len(transcript)
        user, rest = turn_messages(turn, session_id)
        transcript.extend([user, *rest])
        tokens += sum(counter.count_message(message_texts(m)) for m in (user, *rest))
        start = time.perf_counter()
        try:
            await stubs.capture.AfterTurn(
                after_turn_request(ident, transcript, before, args.growth_budget), timeout=args.rpc_timeout
            )
        except grpc.aio.AioRpcError as exc:
            errors.append(describe_error(exc))
            continue
        points.append((turn.index + 1, (time.perf_counter() - start) * 1000.0, tokens))
    wall = time.perf_counter() - wall_start
    values = [p[1] for p in points]
    deciles: list[dict[str, Any]] = []
    if points:
        step = max(1, len(points) // 10)
        for i in range(0, len(points), step):
            chunk = points[i : i + step]
            deciles.append(
                {
                    "turns": f"{chunk[0][0]}-{chunk[-1][0]}",
                    "p50_ms": rounded(percentile([c[1] for c in chunk], 50)),
                    "p99_ms": rounded(percentile([c[1] for c in chunk], 99)),
                    "transcript_tokens": chunk[-1][2],
                }
            )
    done = len(points) + len(errors)
    return {
        "requested_turns": args.growth_turns,
        "tool_result_chars_max": args.growth_tool_chars,
        "turns_done": len(points),
        "capped": done < args.growth_turns,
        "wall_s": rounded(wall),
        "turns_per_s": rounded(done / wall if wall else 0.0),
        "transcript_tokens": tokens,
        "afterturn": stats(values, errors),
        "early_late": early_late([(p[0], p[1]) for p in points]),
        "by_turn_range": deciles,
        "points": [[p[0], rounded(p[1]), p[2]] for p in points],
    }


async def phase_growth_raw(http: httpx.AsyncClient, args: argparse.Namespace) -> dict[str, Any]:
    """The same growing session straight into OpenViking: `POST sessions/{id}/messages`, one message
    per call, each turn's messages in order. Per-turn time = the sum of its calls."""
    if args.growth_turns <= 0:
        return {}
    session = growth_session(args)
    session_id = f"rawgrow-{args.seed}"
    rec = Recorder()
    per_turn: list[tuple[int, float]] = []
    single: list[tuple[int, float]] = []
    stop_at = time.monotonic() + args.growth_seconds
    wall_start = time.perf_counter()
    for turn in session.turns:
        if time.monotonic() > stop_at:
            break
        texts = turn_plain_messages(turn)
        roles = ["user"] + ["assistant"] * (len(texts) - 1)
        turn_ms = 0.0
        ok = True
        for role, text in zip(roles, texts, strict=True):
            start = time.perf_counter()
            answered = await rec.time(
                "ov.add_message",
                ov_call(
                    http,
                    "POST",
                    f"/api/v1/sessions/{session_id}/messages",
                    session.user_id,
                    json=ov_message_body(role, text),
                ),
            )
            ms = (time.perf_counter() - start) * 1000.0
            if answered is None:
                ok = False
                continue
            turn_ms += ms
            single.append((turn.index + 1, ms))
        if ok:
            per_turn.append((turn.index + 1, turn_ms))
            rec.latencies["ov.turn_append"].append(turn_ms)
    wall = time.perf_counter() - wall_start
    return {
        "session_id": session_id,
        "turns_done": len(per_turn),
        "capped": len(per_turn) < args.growth_turns,
        "wall_s": rounded(wall),
        "turns_per_s": rounded(len(per_turn) / wall if wall else 0.0),
        "ops": rec.summary(),
        "add_message_early_late": early_late(single),
        "turn_append_early_late": early_late(per_turn),
    }
