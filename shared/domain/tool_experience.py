"""Tool memory (design Phase 3): per tool, what went wrong and what worked, learned from the
user's own captured tool calls and results.

Per tool the engine keeps the newest error (shortened), the argument shape of the call that
failed, and the shape of the next call of the same tool that succeeded (the fix); a tool that
never failed has no record, and a success that fixes nothing changes nothing (no write: most
tool calls work, and each write costs OpenViking ~4x a read). Shapes are
keys and JSON types (`{"path": string, "recursive": boolean}`), never values, and raw results
are never kept: the error text is the only words of a result that are. The document is in the
user's own space (`viking://~/resources/.contextengine/`), which OpenViking refuses to any other
user (403), so no user ever sees another's experience.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from contextengine.v1 import common_pb2, packet_pb2

from shared.domain.documents import ENGINE_ROOT, DocumentStore, DocumentUpdates
from shared.openviking.tenant import Tenant

TOOL_EXPERIENCE_URI = f"{ENGINE_ROOT}/tool-experience.json"
MAX_ERROR_CHARS = 240
MAX_SHAPE_CHARS = 300
MAX_TOOLS_KEPT = 200
CAS_ATTEMPTS = 6


@dataclass(frozen=True)
class ToolRecord:
    tool_name: str
    error: str = ""
    failing_arguments: str = ""
    fix_arguments: str = ""
    failures: int = 0
    successes: int = 0
    """Calls that worked right after a failure (the fixes)."""
    awaiting_fix: bool = False
    """The newest call failed and no successful call followed yet."""

    def to_proto(self) -> packet_pb2.ToolExperience:
        return packet_pb2.ToolExperience(
            tool_name=self.tool_name,
            error=self.error,
            failing_arguments=self.failing_arguments,
            fix_arguments=self.fix_arguments,
            failures=self.failures,
            successes=self.successes,
        )

    @property
    def worth_telling(self) -> bool:
        return self.failures > 0


@dataclass(frozen=True)
class ToolOutcome:
    """One call of a tool and how it ended."""

    tool_name: str
    arguments_shape: str
    error: str
    """Empty when the call succeeded."""


_SCALAR_TYPES = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (type(None), "null"))


def _type_of(value: Any) -> str:
    for kind, name in _SCALAR_TYPES:  # bool before int: True is an int too
        if isinstance(value, kind):
            return name
    if isinstance(value, list):
        inner = sorted({_type_of(v) for v in value})
        return f"array<{'|'.join(inner)}>" if inner else "array"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_type_of(v)}" for k, v in sorted(value.items())) + "}"
    return "unknown"


def arguments_shape(arguments_json: str) -> str:
    """The keys and JSON types of a call's arguments ("" for none), never their values."""
    if not arguments_json.strip():
        return ""
    try:
        value = json.loads(arguments_json)
    except json.JSONDecodeError:
        return "invalid JSON"
    return _type_of(value)[:MAX_SHAPE_CHARS]


def _result_text(block: common_pb2.ToolResultBlock) -> str:
    return " ".join(" ".join(b.text.text.split()) for b in block.content if b.HasField("text"))


def tool_outcomes(messages: Iterable[common_pb2.ConversationMessage]) -> list[ToolOutcome]:
    """The calls of `messages` that have a result, in call order."""
    calls: dict[str, tuple[str, str]] = {}
    order: list[str] = []
    results: dict[str, common_pb2.ToolResultBlock] = {}
    for message in messages:
        for block in message.content:
            if block.HasField("tool_call") and block.tool_call.name:
                call = block.tool_call
                calls[call.id] = (call.name, arguments_shape(call.arguments.json))
                order.append(call.id)
            elif block.HasField("tool_result"):
                results[block.tool_result.tool_call_id] = block.tool_result
    outcomes = []
    for call_id in order:
        result = results.get(call_id)
        if result is None:
            continue
        name, shape = calls[call_id]
        error = (_result_text(result) or "error") if result.is_error else ""
        outcomes.append(ToolOutcome(name, shape, error[:MAX_ERROR_CHARS]))
    return outcomes


def learned(records: dict[str, ToolRecord], outcomes: Sequence[ToolOutcome]) -> dict[str, ToolRecord]:
    """`records` after `outcomes`: a failure replaces the error and failing shape; the next success
    of that tool records its shape as the fix. Any other success teaches nothing (and leaves
    `records` as they were: a turn whose calls all worked as before writes nothing)."""
    updated = dict(records)
    for outcome in outcomes:
        record = updated.get(outcome.tool_name, ToolRecord(outcome.tool_name))
        if outcome.error:
            record = replace(
                record,
                error=outcome.error,
                failing_arguments=outcome.arguments_shape,
                fix_arguments="",
                failures=record.failures + 1,
                awaiting_fix=True,
            )
        elif record.awaiting_fix:
            record = replace(
                record,
                fix_arguments=outcome.arguments_shape,
                successes=record.successes + 1,
                awaiting_fix=False,
            )
        else:
            continue
        updated[outcome.tool_name] = record
    if len(updated) > MAX_TOOLS_KEPT:  # the tools with failures to tell first
        ranked = sorted(updated.values(), key=lambda r: (r.failures == 0, -r.failures))
        updated = {r.tool_name: r for r in ranked[:MAX_TOOLS_KEPT]}
    return updated


def records_from_document(data: dict[str, Any]) -> dict[str, ToolRecord]:
    return {
        name: ToolRecord(
            tool_name=name,
            error=raw.get("error", ""),
            failing_arguments=raw.get("failing_arguments", ""),
            fix_arguments=raw.get("fix_arguments", ""),
            failures=int(raw.get("failures", 0)),
            successes=int(raw.get("successes", 0)),
            awaiting_fix=bool(raw.get("awaiting_fix", False)),
        )
        for name, raw in data.get("tools", {}).items()
    }


def _document(records: dict[str, ToolRecord]) -> dict[str, Any]:
    return {
        "tools": {
            name: {
                "error": r.error,
                "failing_arguments": r.failing_arguments,
                "fix_arguments": r.fix_arguments,
                "failures": r.failures,
                "successes": r.successes,
                "awaiting_fix": r.awaiting_fix,
            }
            for name, r in records.items()
        }
    }


async def read_tool_records(
    store: DocumentStore, tenant: Tenant, *, deadline: float | None = None
) -> dict[str, ToolRecord]:
    document = await store.read(tenant, TOOL_EXPERIENCE_URI, deadline=deadline)
    return records_from_document(document.data) if document is not None else {}


async def record_tool_outcomes(
    updates: DocumentUpdates,
    tenant: Tenant,
    messages: Iterable[common_pb2.ConversationMessage],
    *,
    deadline: float | None = None,
) -> bool:
    """Learn from the turn's tool calls (compare-and-swap); False when there was nothing to learn
    (no call, or none that failed or fixed a failure: nothing written)."""
    outcomes = tool_outcomes(messages)
    if not outcomes:
        return False

    def apply(data: dict[str, Any]) -> dict[str, Any]:
        return _document(learned(records_from_document(data), outcomes))

    return await updates.change(tenant, TOOL_EXPERIENCE_URI, apply, attempts=CAS_ATTEMPTS, deadline=deadline)
