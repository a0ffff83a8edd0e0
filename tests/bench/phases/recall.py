"""Planted-fact recall probes: engine vs truncation baselines vs the legacy fallback block."""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from contextengine.v1 import (
    assembly_pb2,
    common_pb2,
)

from shared.domain.messages import message_texts
from shared.tokens import TokenCounter
from tests.bench.common import (
    MODEL,
    Recorder,
    Role,
    Stubs,
    identity,
    rounded,
    text_message,
    truncate_newest_first,
    turn_messages,
    turn_plain_messages,
)
from tests.bench.workload import Workload


def assembled_text(response: assembly_pb2.AssembleResponse) -> str:
    parts = [response.system_prompt_addition]
    for message in response.messages:
        parts.extend(message_texts(message))
    return "\n".join(parts)


async def phase_recall(
    stubs: Stubs, workload: Workload, args: argparse.Namespace, counter: TokenCounter
) -> dict[str, Any]:
    rec = Recorder()
    by_session = {s.session_id: s for s in workload.sessions}
    user_history: dict[str, list[str]] = defaultdict(list)
    for session in workload.sessions:
        for turn in session.turns:
            user_history[session.user_id].extend(turn_plain_messages(turn))
    methods = (
        "engine_new_session",
        "engine_same_session",
        "truncated_same_session",
        "truncated_all_sessions",
        "legacy_recall_fallback",
    )
    rows: list[dict[str, Any]] = []
    for fact in workload.facts:
        session = by_session[fact.session_id]
        needle = fact.needle.lower()
        row: dict[str, Any] = {
            "fact": fact.fact_id,
            "stored": fact.stored,
            "kind": fact.kind,
            "planted_turn": fact.turn_index,
            "turns": len(session.turns),
        }
        probe_id = f"probe-{fact.session_id}"
        question = text_message(Role.MESSAGE_ROLE_USER, fact.question, f"{probe_id}-q")
        fresh = await rec.time(
            "Assemble(probe,new session)",
            stubs.assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=identity(fact.user_id, probe_id),
                    messages=[question],
                    token_budget=args.budget,
                    model=MODEL,
                    prompt=fact.question,
                ),
                timeout=args.rpc_timeout,
            ),
        )
        row["engine_new_session"] = None if fresh is None else needle in assembled_text(fresh).lower()
        transcript: list[common_pb2.ConversationMessage] = []
        for turn in session.turns:
            user, rest = turn_messages(turn, f"c1-{session.session_id}")
            transcript.extend([user, *rest])
        transcript.append(
            text_message(Role.MESSAGE_ROLE_USER, fact.question, f"c1-{session.session_id}-probe")
        )
        same = await rec.time(
            "Assemble(probe,same session)",
            stubs.assembly.Assemble(
                assembly_pb2.AssembleRequest(
                    identity=identity(fact.user_id, f"c1-{session.session_id}"),
                    messages=transcript,
                    token_budget=args.budget,
                    model=MODEL,
                    prompt=fact.question,
                ),
                timeout=args.rpc_timeout,
            ),
        )
        row["engine_same_session"] = None if same is None else needle in assembled_text(same).lower()
        own = [t for turn in session.turns for t in turn_plain_messages(turn)] + [fact.question]
        row["truncated_same_session"] = (
            needle in "\n".join(truncate_newest_first(counter, own, args.budget)).lower()
        )
        everything = user_history[fact.user_id] + [fact.question]
        row["truncated_all_sessions"] = (
            needle in "\n".join(truncate_newest_first(counter, everything, args.budget)).lower()
        )
        legacy = await rec.time(
            "RecallFallback",
            stubs.assembly.RecallFallback(
                assembly_pb2.RecallFallbackRequest(
                    identity=identity(fact.user_id, probe_id), prompt=fact.question
                ),
                timeout=args.rpc_timeout,
            ),
        )
        row["legacy_recall_fallback"] = None if legacy is None else needle in legacy.prepend_context.lower()
        rows.append(row)

    def rate(method: str, subset: Iterable[dict[str, Any]]) -> dict[str, Any]:
        values = [r[method] for r in subset if r[method] is not None]
        return {
            "hits": sum(values),
            "n": len(values),
            "rate": rounded(sum(values) / len(values), 3) if values else None,
        }

    summary = {
        method: {
            "all": rate(method, rows),
            "stored": rate(method, [r for r in rows if r["stored"]]),
            "conversation_only": rate(method, [r for r in rows if not r["stored"]]),
        }
        for method in methods
    }
    return {"hit_rate": summary, "ops": rec.summary(), "probes": rows}
