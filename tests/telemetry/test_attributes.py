from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

import shared.telemetry
from shared.telemetry import attributes as attr


def test_engine_attributes_are_prefixed_and_unique() -> None:
    assert len(set(attr.ENGINE_ATTRIBUTES)) == len(attr.ENGINE_ATTRIBUTES)
    assert all(name.startswith(attr.PREFIX) for name in attr.ENGINE_ATTRIBUTES)


def test_the_brief_s_attributes_exist() -> None:
    assert {
        attr.SESSION_ID,
        attr.AGENT_ID,
        attr.TURN_SEQUENCE,
        attr.TOKENS_BUDGET,
        attr.TOKENS_USED,
        attr.TOKENS_CUT,
        attr.RECALLED_COUNT,
        attr.TRIGGER_FIRED,
        attr.CHECKPOINT_ID,
        attr.DEGRADED,
    } <= set(attr.ENGINE_ATTRIBUTES)


def test_every_contextengine_constant_is_listed() -> None:
    constants = {
        value
        for name, value in vars(attr).items()
        if name.isupper() and name != "PREFIX" and isinstance(value, str) and value.startswith(attr.PREFIX)
    }
    assert constants == set(attr.ENGINE_ATTRIBUTES)


def test_setters_write_ids_and_counts_only() -> None:
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("s") as span:
        attr.set_identity(account_id="acme", session_id="s-1", agent_id="")
        attr.set_turn(sequence=7, persisted=2, duplicates=0, openviking_session_id="ov-1")
        attr.set_tokens(budget=1000, used=800, cut=50)
        attr.set_recall(recalled=3)
        attr.set_trigger("COMPACTION_TRIGGER_TURNS")
        attr.set_checkpoint("cp-1", outcome="pending")
    assert dict(span.attributes or {}) == {  # type: ignore[attr-defined]
        attr.ACCOUNT_ID: "acme",
        attr.SESSION_ID: "s-1",
        attr.TURN_SEQUENCE: 7,
        attr.TURN_PERSISTED: 2,
        attr.TURN_DUPLICATES: 0,
        attr.OPENVIKING_SESSION_ID: "ov-1",
        attr.TOKENS_BUDGET: 1000,
        attr.TOKENS_USED: 800,
        attr.TOKENS_CUT: 50,
        attr.RECALLED_COUNT: 3,
        attr.DEGRADED: False,
        attr.TRIGGER_FIRED: "COMPACTION_TRIGGER_TURNS",
        attr.CHECKPOINT_ID: "cp-1",
        attr.COMPACTION_OUTCOME: "pending",
    }


def test_setters_are_harmless_without_a_span() -> None:
    attr.set_tokens(budget=1, used=1, cut=0)
    attr.set_recall(recalled=0, degraded=True)


def test_exported_names_are_pinned() -> None:
    assert sorted(shared.telemetry.__all__) == [
        "FINALISE_SPAN_NAME",
        "OpenVikingTracing",
        "Telemetry",
        "TraceContextFilter",
        "TracingClientInterceptor",
        "TracingServerInterceptor",
        "client_interceptors",
        "current_traceparent",
        "engine_tracer",
        "finalisation_span",
        "install_log_correlation",
        "link_from_traceparent",
        "openviking_route",
        "setup_telemetry",
        "trace_headers",
    ]
