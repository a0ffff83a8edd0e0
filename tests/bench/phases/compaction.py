# ruff: noqa: PLR0917
"""Compact (sync and background twins) on replayed and long ingested sessions, then ExpandMemory."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import grpc
from contextengine.v1 import (
    compaction_pb2,
)

from tests.bench.common import (
    COMPLETED,
    FAILED,
    MODEL,
    PENDING,
    STATUS_NAMES,
    Recorder,
    SpanWindows,
    Stubs,
    describe_error,
    expand_queries,
    identity,
    ingest_session,
    rounded,
)
from tests.bench.workload import Session, Workload, generate


async def compact_once(
    stubs: Stubs,
    rec: Recorder,
    spans: SpanWindows,
    user_id: str,
    session_id: str,
    budget: int,
    op: str,
    *,
    background: bool = False,
    completion_timeout: float = 300,
) -> dict[str, Any]:
    """One forced Compact; with `background`, then poll GetCheckpoint until it is no longer PENDING."""
    ident = identity(user_id, session_id)
    window_start = time.time_ns()
    start = time.perf_counter()
    compacted = await rec.time(
        op,
        stubs.compaction.Compact(
            compaction_pb2.CompactRequest(
                identity=ident, token_budget=budget, force=True, model=MODEL, background=background
            ),
            timeout=300,
        ),
    )
    rpc_ms = (time.perf_counter() - start) * 1000
    spans.routes.append((f"{op}:{session_id}", "Compact", window_start, time.time_ns()))
    out: dict[str, Any] = {
        "session_id": session_id,
        "op": op,
        "background": background,
        "compact_ms": rounded(rpc_ms),
        "span_label": f"{op}:{session_id}",
    }
    if compacted is None:
        out["compact_error"] = rec.errors[op][-1]
        return out
    checkpoint = compacted.checkpoint
    out.update(
        compacted=compacted.compacted,
        reason=compacted.reason,
        tokens_before=compacted.tokens_before,
        tokens_after=compacted.tokens_after,
        checkpoint_id=checkpoint.checkpoint_id,
        archive_uri=checkpoint.archive_uri,
    )
    if background and checkpoint.checkpoint_id:
        status = checkpoint.status
        deadline = time.monotonic() + completion_timeout
        polls = 0
        while status == PENDING and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            polls += 1
            try:
                got = await stubs.compaction.GetCheckpoint(
                    compaction_pb2.GetCheckpointRequest(
                        identity=ident, checkpoint_id=checkpoint.checkpoint_id
                    ),
                    timeout=30,
                )
            except grpc.aio.AioRpcError as exc:
                out["poll_error"] = describe_error(exc)
                continue
            status = got.checkpoint.status
            if got.checkpoint.archive_uri:
                out["archive_uri"] = got.checkpoint.archive_uri
            if status == FAILED:
                out["failure_reason"] = got.checkpoint.failure_reason
        out["status"] = STATUS_NAMES.get(status, str(status))
        out["polls"] = polls
        if status == COMPLETED:
            out["to_completed_ms"] = rounded((time.perf_counter() - start) * 1000)
    else:
        out["status"] = STATUS_NAMES.get(checkpoint.status, str(checkpoint.status))
        if checkpoint.status == COMPLETED:
            out["to_completed_ms"] = out["compact_ms"]
    return out


async def phase_compaction(
    stubs: Stubs, workload: Workload, args: argparse.Namespace, spans: SpanWindows
) -> dict[str, Any]:
    rec = Recorder()
    details: list[dict[str, Any]] = []
    targets: list[tuple[str, str, Session]] = []  # (user, session id, session) with an archive to expand
    # Sessions replayed at concurrency 1 (already captured turn by turn).
    for session in workload.sessions[: args.compact_sessions]:
        detail = await compact_once(
            stubs, rec, spans, session.user_id, f"c1-{session.session_id}", args.budget, "Compact"
        )
        details.append(detail)
        if detail.get("archive_uri") or detail.get("checkpoint_id"):
            targets.append((session.user_id, f"c1-{session.session_id}", session))
    # Long sessions ingested in big batches, then compacted: one twin synchronously (Compact latency,
    # OpenViking's commit call inside it) and one with background=true (phase-1 latency, then
    # GetCheckpoint polled until COMPLETED).
    sizes: list[dict[str, Any]] = []
    for size in args.compact_turns:
        big = generate(1, size, args.seed + size, prefix=f"big{size}-").sessions[0]
        sync_id, bg_id = f"big{size}-{args.seed}", f"big{size}bg-{args.seed}"
        ingest_start = time.perf_counter()
        await asyncio.gather(
            ingest_session(stubs, big, sync_id, rec, 300, args.ingest_batch),
            ingest_session(stubs, big, bg_id, rec, 300, args.ingest_batch),
        )
        ingest_s = time.perf_counter() - ingest_start
        sync = await compact_once(
            stubs, rec, spans, big.user_id, sync_id, args.budget, f"Compact@{size}turns"
        )
        bg = await compact_once(
            stubs,
            rec,
            spans,
            big.user_id,
            bg_id,
            args.budget,
            f"Compact(background)@{size}turns",
            background=True,
        )
        for d in (sync, bg):
            d["turns"] = size
            details.append(d)
        sizes.append({"turns": size, "ingest_both_s": rounded(ingest_s), "sync": sync, "background": bg})
        targets += [(big.user_id, sync_id, big), (big.user_id, bg_id, big)]
    # ExpandMemory over every compacted session, varied queries and limits.
    by_session = {d["session_id"]: d for d in details}
    usable = [
        t for t in targets if by_session[t[1]].get("archive_uri") or by_session[t[1]].get("checkpoint_id")
    ]
    expand_window = time.time_ns()
    expanded_turns: list[int] = []
    if usable:
        per = max(1, -(-args.expand_calls // len(usable)))
        calls = 0
        for round_ in range(per):
            for user_id, session_id, session in usable:
                if calls >= args.expand_calls:
                    break
                d = by_session[session_id]
                uri = d.get("archive_uri") or d["checkpoint_id"]
                query = expand_queries(session, args.seed + round_, per)[round_]
                limit = (2, 4, 6)[calls % 3]  # the API allows 1..6
                got = await rec.time(
                    "ExpandMemory",
                    stubs.compaction.ExpandMemory(
                        compaction_pb2.ExpandMemoryRequest(
                            identity=identity(user_id, session_id),
                            summary_or_memory_uri=uri,
                            query=query,
                            limit=limit,
                        ),
                        timeout=60,
                    ),
                )
                if got is not None:
                    expanded_turns.append(len(got.turns))
                calls += 1
    spans.routes.append(("ExpandMemory", "ExpandMemory", expand_window, time.time_ns()))
    return {
        "ops": rec.summary(),
        "sessions": details,
        "sizes": sizes,
        "expand": {
            "calls": len(expanded_turns),
            "sessions": len(usable),
            "turns_returned_mean": rounded(sum(expanded_turns) / len(expanded_turns), 1)
            if expanded_turns
            else None,
        },
    }
