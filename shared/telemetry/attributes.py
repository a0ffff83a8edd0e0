"""Every span and metric attribute name the engine sets, in one place.

Engine attributes live under the `contextengine.` prefix; RPC and HTTP attributes use the
OpenTelemetry semantic-convention names so Jaeger and dashboards recognise them. Spans carry
identifiers, counts and flags only: never message text, prompts, summaries or memory content.

The `set_*` helpers write onto the given span, or the current one when none is given, and are
safe to call when telemetry is off (the current span is then non-recording).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.trace import Span

PREFIX = "contextengine."

# --- identity (ids only) ---
ACCOUNT_ID = "contextengine.account.id"
"""OpenViking account the request acts for."""
SESSION_ID = "contextengine.session.id"
"""The host's session id."""
AGENT_ID = "contextengine.agent.id"
"""Agent the request acts for."""
OPENVIKING_SESSION_ID = "contextengine.openviking.session.id"
"""OpenViking session the turn landed in."""

# --- turns (capture) ---
TURN_SEQUENCE = "contextengine.turn.sequence"
"""Sequence of the last persisted host message."""
TURN_PERSISTED = "contextengine.turn.persisted"
"""Messages newly written by this call."""
TURN_DUPLICATES = "contextengine.turn.duplicates"
"""Messages skipped as already persisted."""

# --- tokens (assembly / capture) ---
TOKENS_BUDGET = "contextengine.tokens.budget"
"""Token budget the call worked within."""
TOKENS_USED = "contextengine.tokens.used"
"""Tokens of the assembled (or live) context."""
TOKENS_CUT = "contextengine.tokens.cut"
"""Tokens left out to fit the budget."""

# --- recall (assembly) ---
RECALLED_COUNT = "contextengine.recall.count"
"""Memories injected / returned."""
DEGRADED = "contextengine.degraded"
"""True when the answer is partial because a backend call failed or timed out."""
RECALL_INTENT = "contextengine.recall.intent"
"""The recall intent's decision: `recall` or the reason it was skipped (`greeting`, `follow_up`, ...)."""
RECALL_SOURCES = "contextengine.recall.sources"
"""The sources the intent chose, comma-separated (memories,exchanges,skills,...)."""

# --- compaction ---
TRIGGER_FIRED = "contextengine.compaction.trigger"
"""Name of the `CompactionTrigger` that fired (e.g. `COMPACTION_TRIGGER_TURNS`)."""
CHECKPOINT_ID = "contextengine.checkpoint.id"
"""Checkpoint a compaction writes or finalises."""
COMPACTION_OUTCOME = "contextengine.compaction.outcome"
"""`completed`, `failed`, `pending` or `skipped`."""

# --- metric dimensions ---
BACKGROUND_WORK = "contextengine.background.work"
"""Which background queue (`turn_index`, `appends`, `nudges`)."""
RPC_SERVICE = "rpc.service"
"""Full proto service name, e.g. `contextengine.v1.CaptureService`."""
RPC_METHOD = "rpc.method"
"""RPC name, e.g. `AfterTurn`."""
RPC_SYSTEM = "rpc.system"
RPC_STATUS = "rpc.grpc.status_code"
"""gRPC status name, e.g. `OK`, `UNAVAILABLE`."""
HTTP_METHOD = "http.request.method"
HTTP_ROUTE = "url.template"
"""Low-cardinality OpenViking route, ids replaced by `{id}`."""
HTTP_STATUS = "http.response.status_code"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
"""Exception class name or HTTP status of a failed call."""
PEER_SERVICE = "peer.service"

ENGINE_ATTRIBUTES = (
    BACKGROUND_WORK,
    ACCOUNT_ID,
    SESSION_ID,
    AGENT_ID,
    OPENVIKING_SESSION_ID,
    TURN_SEQUENCE,
    TURN_PERSISTED,
    TURN_DUPLICATES,
    TOKENS_BUDGET,
    TOKENS_USED,
    TOKENS_CUT,
    RECALLED_COUNT,
    DEGRADED,
    RECALL_INTENT,
    RECALL_SOURCES,
    TRIGGER_FIRED,
    CHECKPOINT_ID,
    COMPACTION_OUTCOME,
)
"""All `contextengine.*` attribute names (pinned by tests)."""


def _span(span: Span | None) -> Span:
    return span if span is not None else trace.get_current_span()


def set_identity(
    *, account_id: str = "", session_id: str = "", agent_id: str = "", span: Span | None = None
) -> None:
    """Who the call acts for; empty values are left out."""
    target = _span(span)
    for key, value in ((ACCOUNT_ID, account_id), (SESSION_ID, session_id), (AGENT_ID, agent_id)):
        if value:
            target.set_attribute(key, value)


def set_turn(
    *,
    sequence: int,
    persisted: int | None = None,
    duplicates: int | None = None,
    openviking_session_id: str = "",
    span: Span | None = None,
) -> None:
    """What AfterTurn / Ingest wrote."""
    target = _span(span)
    target.set_attribute(TURN_SEQUENCE, sequence)
    if persisted is not None:
        target.set_attribute(TURN_PERSISTED, persisted)
    if duplicates is not None:
        target.set_attribute(TURN_DUPLICATES, duplicates)
    if openviking_session_id:
        target.set_attribute(OPENVIKING_SESSION_ID, openviking_session_id)


def set_tokens(
    *, budget: int | None = None, used: int | None = None, cut: int | None = None, span: Span | None = None
) -> None:
    """Token accounting of an Assemble (or the live context after a capture)."""
    target = _span(span)
    for key, value in ((TOKENS_BUDGET, budget), (TOKENS_USED, used), (TOKENS_CUT, cut)):
        if value is not None:
            target.set_attribute(key, value)


def set_recall(*, recalled: int, degraded: bool = False, span: Span | None = None) -> None:
    """How many memories were recalled and whether recall was degraded."""
    target = _span(span)
    target.set_attribute(RECALLED_COUNT, recalled)
    target.set_attribute(DEGRADED, degraded)


def set_recall_intent(decision: str, sources: Sequence[str], *, span: Span | None = None) -> None:
    """What the recall intent stage decided for this Assemble."""
    target = _span(span)
    target.set_attribute(RECALL_INTENT, decision)
    target.set_attribute(RECALL_SOURCES, ",".join(sources))


def set_degraded(degraded: bool = True, *, span: Span | None = None) -> None:
    _span(span).set_attribute(DEGRADED, degraded)


def set_trigger(trigger: str, *, span: Span | None = None) -> None:
    """The compaction trigger that fired (its enum name); call only when one fired."""
    _span(span).set_attribute(TRIGGER_FIRED, trigger)


def set_checkpoint(checkpoint_id: str, *, outcome: str = "", span: Span | None = None) -> None:
    """Checkpoint being written or finalised, and optionally its outcome."""
    target = _span(span)
    if checkpoint_id:
        target.set_attribute(CHECKPOINT_ID, checkpoint_id)
    if outcome:
        target.set_attribute(COMPACTION_OUTCOME, outcome)
