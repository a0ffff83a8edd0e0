"""Acceptance scenarios that need no LLM, in local (dev) and remote (trusted) OpenViking modes
(docs/design.md): §11.2 explicit memory, §11.3 drill-down, §11.4 engine-not-hook, §10.2 item 6
(two agents), §10.3 recall budget. Through the public gRPC API only.

Without an LLM OpenViking extracts no memories (its summary is a plain digest), so here §11.2 covers the
explicit half (immediate store, recall, no duplicates) and §11.3 the expand half (checkpoint and
summary URI back to the exact raw turns); the LLM halves are in test_acceptance_llm.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
from contextengine.v1 import assembly_pb2, packet_pb2

from shared.domain.recall_handles import handle_for
from tests.e2e.host import (
    SUMMARY_HEADER,
    HostSession,
    Status,
    Stubs,
    all_text,
    engine,
    envelope_text,
    is_injected,
    new_user_id,
    recall_pair,
    recalled_tool_result,
)
from tests.support.stack import OpenVikingEndpoint, RemoteOpenViking

pytestmark = pytest.mark.stack

ACCOUNT = f"e2e-modes-{uuid.uuid4().hex[:8]}"
RECALL_TOKEN_BUDGET = 300
COMMON = {
    "memoryExpandMaxResults": 100,
    "recentRawTurnCount": 4,
    "timeoutMs": 60_000,
    "recallTimeoutMs": 20_000,
}


def _overrides(request: pytest.FixtureRequest, name: str) -> dict[str, object]:
    server: OpenVikingEndpoint = request.getfixturevalue(name)
    if isinstance(server, RemoteOpenViking):
        return {
            "mode": "remote",
            "baseUrl": server.base_url,
            "apiKey": server.root_api_key,
            "openvikingAuthMode": server.auth_mode,
        }
    return {"baseUrl": server.base_url}


@pytest.fixture(scope="module", params=["openviking", "openviking_trusted"])
async def any_mode(request: pytest.FixtureRequest) -> AsyncIterator[Stubs]:
    """The engine against local (dev auth) and remote (trusted auth) OpenViking."""
    async with engine(**_overrides(request, request.param), **COMMON) as stubs:
        yield stubs


@pytest.fixture(scope="module")
async def local(openviking: OpenVikingEndpoint) -> AsyncIterator[Stubs]:
    async with engine(baseUrl=openviking.base_url, recallTokenBudget=RECALL_TOKEN_BUDGET, **COMMON) as stubs:
        yield stubs


@pytest.fixture(scope="module")
async def engine_only(openviking: OpenVikingEndpoint) -> AsyncIterator[Stubs]:
    """The before_prompt_build recall path switched off (RecallFallback refused)."""
    async with engine(baseUrl=openviking.base_url, fallbackRecallEnabled=False, **COMMON) as stubs:
        yield stubs


def session(stubs: Stubs, user: str, agent: str = "main", name: str = "") -> HostSession:
    return HostSession(stubs, ACCOUNT, user, session=name or f"s-{uuid.uuid4().hex[:6]}", agent=agent)


SCHEMA_QUESTION = "Which tables does the invoice service own?"
SCHEMA_OUTPUT = "invoices, invoice_lines, payment_attempts"


async def converse(host: HostSession) -> None:
    await host.turn(
        SCHEMA_QUESTION,
        "The invoice service owns invoices, invoice_lines and payment_attempts.",
        [("list_tables", {"service": "invoice"}, SCHEMA_OUTPUT)],
    )
    await host.turn("Which port does it listen on?", "It listens on port 8443.")
    await host.turn(
        "Is the nightly export job healthy?",
        "Yes, the last three nightly exports succeeded.",
        [("job_status", {"job": "nightly-export"}, "ok ok ok")],
    )


async def test_explicit_memory_is_stored_at_once_and_never_duplicated(any_mode: Stubs) -> None:
    """§11.2 (explicit half), local and remote: memory_store writes now, recall sees it at once,
    the same text twice is one memory, and a new session's Assemble injects it once."""
    host = session(any_mode, new_user_id("explicit"))
    text = "Remember I prefer dark theme in every editor."
    stored = await host.store(text)
    assert stored.created and f"/user/{host.user}/" in stored.uri
    again = await host.store(text)
    assert (again.created, again.uri) == (False, stored.uri)

    recalled = await host.recall("which theme do I prefer?")
    assert not recalled.degraded
    assert [m.uri for m in recalled.memories].count(stored.uri) == 1

    fresh = session(any_mode, host.user)
    assembled = await fresh.assemble("Set up my editor the way I like it, which theme?")
    assert not assembled.packet.degraded, assembled.packet.degraded_reasons
    shown = [
        *(m.uri for m in assembled.packet.recalled_memories),
        *(b for b in assembled.packet.profile_blocks if "dark theme" in b),
    ]
    assert len(shown) == 1, (shown, list(assembled.packet.profile_blocks))
    assert all_text(assembled.messages).count("dark theme in every editor") == 1


async def test_compacted_turns_expand_back_exactly(any_mode: Stubs) -> None:
    """§11.3 (expand half), local and remote: after compaction the checkpoint and the summary URI
    lead back to the exact raw turns, tool calls and results included."""
    host = session(any_mode, new_user_id("drill"))
    await converse(host)
    compacted = await host.compact()
    cp = compacted.checkpoint
    assert compacted.compacted and cp.status == Status.CHECKPOINT_STATUS_COMPLETED, compacted
    assert (cp.source_turn_range.start_sequence, cp.source_turn_range.end_sequence) == (0, 9)

    for reference in (cp.checkpoint_id, cp.summary_uri):
        expanded = await host.expand(reference)
        assert expanded.checkpoint_id == cp.checkpoint_id
        turns = [t.turn for t in expanded.turns]
        assert [t.sequence for t in turns] == list(range(10))
        assert [t.host_message_id for t in turns] == [m.id for m in host.transcript]
        assert envelope_text(turns[0]) == SCHEMA_QUESTION
        assert turns[1].tool_calls[0].tool_name == "list_tables"
        assert SCHEMA_OUTPUT in turns[2].tool_results[0].result.json
    ranked = await host.expand(cp.checkpoint_id, query="port listen", limit=1)
    assert envelope_text(ranked.turns[0].turn) == "Which port does it listen on?"

    # Without an LLM OpenViking's summary is a count-only placeholder, never injected: the
    # engine's own extractive summary stands in, naming the checkpoint it expands from; the recent
    # raw turns stay in the context.
    assembled = await host.assemble("And the export job?")
    assert not assembled.packet.degraded, assembled.packet.degraded_reasons
    summaries = [m for m in assembled.messages if is_injected(m) and all_text([m]).startswith(SUMMARY_HEADER)]
    [summary] = assembled.packet.compact_summaries
    assert (summary.checkpoint_id, summary.archive_uri) == (cp.checkpoint_id, cp.archive_uri)
    assert "8443" in summary.overview and summary.overview == compacted.summary
    assert len(summaries) == 1 and f'memory_expand("{cp.checkpoint_id}")' in all_text(summaries)
    assert "**Overview**" not in all_text(assembled.messages)
    assert SCHEMA_QUESTION in all_text([m for m in assembled.messages if not is_injected(m)])
    session_uri = cp.archive_uri.split("/history/")[0]
    from_session = await host.expand(session_uri)
    assert [t.turn.host_message_id for t in from_session.turns] == [m.id for m in host.transcript[:10]]


async def test_engine_not_hook_lifecycle(engine_only: Stubs) -> None:
    """§11.4: with the before_prompt_build recall path disabled the engine alone captures, recalls
    (the memory_recall_auto pair), compacts and expands."""
    host = session(engine_only, new_user_id("engine"))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await engine_only.assembly.RecallFallback(
            assembly_pb2.RecallFallbackRequest(identity=host.identity, prompt="what do I like?")
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    stored = await host.store("The invoice service is owned by the payments team in Lisbon.")
    await converse(host)
    assert [r.persisted_count for r in host.after_turns] == [4, 2, 4]

    assembled = await host.assemble("Who owns the invoice service?")
    pair = recall_pair(assembled.messages)
    assert len(pair) == 2 and pair[0].content[0].tool_call.name == "memory_recall_auto"
    shown = recalled_tool_result(assembled.messages)["memories"]
    assert isinstance(shown, list)
    assert any(str(m).endswith(f"ref={handle_for(stored.uri)}") for m in shown), shown

    compacted = await host.compact()
    assert compacted.compacted and compacted.checkpoint.status == Status.CHECKPOINT_STATUS_COMPLETED
    expanded = await host.expand(compacted.checkpoint.checkpoint_id)
    assert envelope_text(expanded.turns[0].turn) == SCHEMA_QUESTION


async def test_two_agents_in_one_host_session_stay_separate(local: Stubs) -> None:
    """§10.2 item 6: the same host session with agents a1 and a2 keeps separate buffers, state,
    checkpoints and agent memories."""
    user, name = new_user_id("agents"), f"shared-{uuid.uuid4().hex[:6]}"
    a1, a2 = session(local, user, "a1", name), session(local, user, "a2", name)
    first = await a1.turn("a1: check the invoice schema.", "a1: schema checked.")
    second = await a2.turn("a2: check the billing schema.", "a2: billing checked.")
    assert first.openviking_session_id and second.openviking_session_id
    assert first.openviking_session_id != second.openviking_session_id
    # Each agent's transcript starts at position 0: nothing of a1's counts as a2's.
    assert (first.persisted_count, first.last_sequence) == (2, 1)
    assert (second.persisted_count, second.last_sequence) == (2, 1)

    compacted = await a1.compact()
    assert compacted.compacted
    assert [c.checkpoint_id for c in await a1.checkpoints()] == [compacted.checkpoint.checkpoint_id]
    assert await a2.checkpoints() == []
    assert compacted.checkpoint.agent_id == "a1"
    expanded = await a1.expand(compacted.checkpoint.checkpoint_id)
    assert [envelope_text(t.turn) for t in expanded.turns] == [
        "a1: check the invoice schema.",
        "a1: schema checked.",
    ]

    fact = "Agent a1 deploys the invoice service with blue-green releases."
    stored = await a1.store(fact, scope=packet_pb2.MEMORY_SCOPE_AGENT)
    assert stored.created
    query = "how does the invoice service get deployed?"
    for_a1 = await a1.recall(query)
    assert stored.uri in [m.uri for m in for_a1.memories]
    assert next(m for m in for_a1.memories if m.uri == stored.uri).scope == packet_pb2.MEMORY_SCOPE_AGENT
    for_a2 = await a2.recall(query)
    assert stored.uri not in [m.uri for m in for_a2.memories]
    assembled = await a2.assemble(query)
    assert fact not in all_text(assembled.messages)


async def _many_relevant_memories(host: HostSession) -> None:
    for i in range(8):
        await host.store(
            f"Deployment note {i}: the invoice service deploys from the release-{i} branch through the "
            f"staging cluster stage-{i}, after the smoke tests of suite {i} pass and the on-call engineer "
            f"number {i} approves the change in the deployment channel."
        )
    await converse(host)


DEPLOY_QUESTION = "How does the invoice service get deployed?"


async def test_recall_never_inflates_the_context_beyond_its_budgets(local: Stubs) -> None:
    """§10.3: many relevant memories do not inflate the context: the recalled memories' lines stay
    within recallTokenBudget (the rest is cut) and the whole context within the host's budget."""
    host = session(local, new_user_id("budget"))
    await _many_relevant_memories(host)
    for budget in (1_500, 4_000):
        assembled = await host.assemble(DEPLOY_QUESTION, token_budget=budget)
        packet = assembled.packet
        tokens = packet.tokens
        assert tokens.budget == budget
        assert tokens.used <= budget and assembled.estimated_tokens <= budget, tokens
        assert not tokens.over_budget
        # What recall injects is bounded: 8 relevant memories of ~50 tokens, budget 300 (the
        # query of the recall window travels in the call, so here it may leave room for none).
        assert len(packet.recalled_memories) < 8
        assert tokens.recall <= RECALL_TOKEN_BUDGET, tokens
        # The host's newest turn is never dropped in favour of recall.
        own = [m for m in assembled.messages if not is_injected(m)]
        assert all_text(own[-1:]) == DEPLOY_QUESTION


async def test_injected_recall_tokens_stay_within_recall_token_budget(local: Stubs) -> None:
    """§10.3 strictly: packet.tokens.recall (the injected pair as counted) <= recallTokenBudget."""
    host = session(local, new_user_id("budget-strict"))
    await _many_relevant_memories(host)
    assembled = await host.assemble(DEPLOY_QUESTION, token_budget=4_000)
    assert assembled.packet.recalled_memories
    assert assembled.packet.tokens.recall <= RECALL_TOKEN_BUDGET, assembled.packet.tokens
