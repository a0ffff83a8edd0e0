"""Acceptance scenarios (docs/design.md §11.1-§11.3, §10.3 first item) against the real local OpenViking
wired to the deterministic stand-in LLM, through the public gRPC API only.

What the stand-in extracts (tests/support/standin_llm.py), and therefore what these tests may
rely on: from *user* lines only, "prefer" -> a preference memory, "decide(d)" -> an event memory,
"remember" -> an entity card; its working-memory summary lists the user's decisions under
"## Key Facts & Decisions". It never extracts anything the *assistant* said, so an assistant's
database suggestion never becomes a long-term memory on its own: §11.1's second question is
answered through §11.3's mechanism, from the recalled decision memory back to the raw turns of the
compaction that produced it (ExpandMemory ranks those turns by the question).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from contextengine.v1 import checkpoint_pb2

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
from tests.support.stack import OpenVikingWithLlm

pytestmark = [pytest.mark.stack, pytest.mark.llm]

ACCOUNT = f"e2e-llm-{uuid.uuid4().hex[:8]}"
TURN_THRESHOLD = 10

FIRST_QUESTION = "Project X: the orders page takes 9 seconds to load. Any database advice?"
EXPLAIN_OUTPUT = "Seq Scan on orders  (cost=0.00..48210.00 rows=1200) Filter: (customer_id = 42)"
SLOW_QUERY_SUGGESTION = (
    "Database suggestion 1, for the slow queries: add a composite index on orders(customer_id, created_at) "
    "and confirm with EXPLAIN ANALYZE that the sequential scan is gone."
)
POOL_SUGGESTION = (
    "Database suggestion 2, for connection errors: raise pool_size from 5 to 20 for the API workers."
)
DECISION = "We decided that project X migrates from MySQL to PostgreSQL 16 next sprint."
BACKUP_SUGGESTION = "Database suggestion 3, for backups: enable WAL archiving for point-in-time recovery."


def long_conversation() -> list[tuple[str, str, list[tuple[str, dict[str, object], str]]]]:
    """22 turns; the decision and the database suggestions come early, tool exchanges throughout."""
    turns: list[tuple[str, str, list[tuple[str, dict[str, object], str]]]] = [
        (
            FIRST_QUESTION,
            SLOW_QUERY_SUGGESTION,
            [("run_sql", {"sql": "EXPLAIN SELECT * FROM orders WHERE customer_id = 42"}, EXPLAIN_OUTPUT)],
        ),
        (
            "We also see 'too many connections' errors at peak. What about those?",
            POOL_SUGGESTION,
            [("read_file", {"path": "projectx/config/db.yaml"}, "pool_size: 5\nmax_overflow: 0")],
        ),
        (DECISION, "Noted: project X moves to PostgreSQL 16 next sprint.", []),
        ("And backups for the new database?", BACKUP_SUGGESTION, []),
    ]
    for i in range(4, 22):
        tools = (
            [("run_tests", {"suite": f"module_{i}"}, f"module_{i}: 12 passed in 0.{i}s")]
            if i % 3 == 0
            else []
        )
        turns.append(
            (
                f"Step {i}: review module {i} of the checkout service.",
                f"Module {i} of checkout looks fine.",
                tools,
            )
        )
    return turns


@dataclass
class LongConversation:
    stubs: Stubs
    host: HostSession
    user: str
    checkpoint: checkpoint_pb2.CompactCheckpoint
    """The checkpoint of the first TURN_COUNT compaction (holds the decision and suggestions)."""


@pytest.fixture(scope="module")
async def llm_engine(openviking_llm: OpenVikingWithLlm) -> AsyncIterator[Stubs]:
    async with engine(
        baseUrl=openviking_llm.base_url,
        compactTurnThreshold=TURN_THRESHOLD,
        memoryExpandMaxResults=100,
        recentRawTurnCount=4,
        compactTaskTimeoutMs=150_000,
        timeoutMs=60_000,
        recallTimeoutMs=20_000,
    ) as stubs:
        yield stubs


@pytest.fixture(scope="module")
async def long_conversation_done(llm_engine: Stubs) -> LongConversation:
    """§11.1 first half: a long conversation whose AfterTurn triggers a background compaction."""
    user = new_user_id("continuity")
    host = HostSession(llm_engine, ACCOUNT, user, session=f"s1-{uuid.uuid4().hex[:6]}")
    for user_text, answer, tools in long_conversation():
        await host.turn(user_text, answer, tools)
    fired = [r for r in host.after_turns if r.trigger_fired != checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED]
    assert fired, [r.estimated_tokens for r in host.after_turns]
    first = fired[0]
    assert first.trigger_fired == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
    assert first.compaction_checkpoint_id
    # compactTurnThreshold counts user turns: the tenth turn fires it.
    assert host.after_turns.index(first) == TURN_THRESHOLD - 1
    checkpoint = await host.wait_checkpoint(first.compaction_checkpoint_id)
    assert checkpoint.status == Status.CHECKPOINT_STATUS_COMPLETED, checkpoint
    assert checkpoint.trigger == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
    assert checkpoint.source_turn_range.start_sequence == 0
    assert checkpoint.source_turn_range.end_sequence == first.last_sequence
    assert any("/memories/events/" in uri for uri in checkpoint.extracted_memory_uris), checkpoint
    # Any later trigger in this conversation must finish too before the scenarios read.
    listed = await host.wait_all_checkpoints()
    assert all(c.status == Status.CHECKPOINT_STATUS_COMPLETED for c in listed), listed
    return LongConversation(llm_engine, host, user, checkpoint)


async def test_long_conversation_continuity_in_a_new_session(
    long_conversation_done: LongConversation,
) -> None:
    """§11.1: after compaction a new host session of the same user recalls the decision, and the
    slow-query suggestion is found by expanding the recalled decision memory back to its turns."""
    done = long_conversation_done
    later = HostSession(done.stubs, ACCOUNT, done.user, session=f"s2-{uuid.uuid4().hex[:6]}")

    question = "What did we decide about project X last week?"
    assembled = await later.assemble(question)
    assert not assembled.packet.degraded, assembled.packet.degraded_reasons
    assert len(recall_pair(assembled.messages)) == 2
    recalled = recalled_tool_result(assembled.messages)
    contents = [str(m) for m in recalled["memories"]]  # type: ignore[union-attr]
    assert any("PostgreSQL 16" in c for c in contents), contents
    # The extracted memory is recalled (raw exchanges saying it may be recalled beside it).
    decision_uris = [
        m.uri
        for m in assembled.packet.recalled_memories
        if "PostgreSQL 16" in m.content and m.kind == "memory"
    ]
    assert decision_uris and all(u in done.checkpoint.extracted_memory_uris for u in decision_uris)
    await later.turn(
        question, "Last week we decided: project X migrates from MySQL to PostgreSQL 16.", assemble=False
    )

    question = "Which of your database suggestions was about slow queries?"
    assembled = await later.assemble(question)
    assert not assembled.packet.degraded, assembled.packet.degraded_reasons
    memory = next(
        m for m in assembled.packet.recalled_memories if m.uri in done.checkpoint.extracted_memory_uris
    )
    if SLOW_QUERY_SUGGESTION not in all_text(assembled.messages):
        # The stand-in extracted no assistant text: drill down from the recalled memory.
        expanded = await later.expand(memory.uri, query=question, limit=3)
        assert expanded.checkpoint_id == done.checkpoint.checkpoint_id
        assert done.checkpoint.archive_uri in expanded.linked_uris
        top = expanded.turns[0]
        assert envelope_text(top.turn) == SLOW_QUERY_SUGGESTION, [
            envelope_text(t.turn) for t in expanded.turns
        ]
        assert top.turn.host_message_id.startswith(done.host.session)


async def test_compacted_history_drills_down_to_raw_turns(long_conversation_done: LongConversation) -> None:
    """§11.3: the original session answers from the injected summary first, then ExpandMemory from
    the summary returns the exact raw turns behind it."""
    done = long_conversation_done
    host = done.host
    assembled = await host.assemble("Where were we with project X?")
    assert not assembled.packet.degraded, assembled.packet.degraded_reasons
    summaries = [m for m in assembled.messages if is_injected(m) and all_text([m]).startswith(SUMMARY_HEADER)]
    assert len(summaries) == 1, [m.id for m in assembled.messages]
    summary_text = all_text(summaries)
    assert DECISION in summary_text  # the model can answer from the summary alone
    assert assembled.packet.compact_summaries
    # Raw history the summary replaced is not in the working context any more.
    assert EXPLAIN_OUTPUT not in all_text(assembled.messages)

    # The model can drill down from what it was shown: the summary names its expand reference.
    shown = re.search(r'memory_expand\("([^"]+)"\)', summary_text)
    assert shown is not None, summary_text
    cp = done.checkpoint
    for reference in (
        shown[1],
        cp.summary_uri,
        assembled.packet.compact_summaries[0].session_uri,
        cp.checkpoint_id,
    ):
        expanded = await host.expand(reference)
        by_sequence = {t.turn.sequence: t.turn for t in expanded.turns}
        assert set(range(cp.source_turn_range.end_sequence + 1)) <= set(by_sequence), (
            reference,
            sorted(by_sequence),
        )
        assert envelope_text(by_sequence[0]) == FIRST_QUESTION
        assert by_sequence[0].host_message_id == host.transcript[0].id
        assert by_sequence[1].tool_calls[0].tool_name == "run_sql"
        assert EXPLAIN_OUTPUT in by_sequence[2].tool_results[0].result.json
        assert envelope_text(by_sequence[3]) == SLOW_QUERY_SUGGESTION
        assert envelope_text(by_sequence[8]) == DECISION
        assert cp.archive_uri + "/.overview.md" in expanded.readable_uris


async def test_injected_context_is_never_recaptured(long_conversation_done: LongConversation) -> None:
    """§10.3: a host that keeps the assembled messages (summary, memory_recall_auto pair) in its
    transcript sends them back through AfterTurn; none of them is persisted."""
    done = long_conversation_done
    host = done.host
    prompt = "What did we decide about the database for project X?"
    assembled = await host.assemble(prompt)
    injected = [m for m in assembled.messages if is_injected(m)]
    assert any(all_text([m]).startswith(SUMMARY_HEADER) for m in injected)
    assert len(recall_pair(injected)) == 2, [m.id for m in assembled.messages]
    await host.wait_all_checkpoints()

    host.transcript.extend(injected)
    response = await host.turn(prompt, "Project X moves to PostgreSQL 16.", assemble=False)
    assert response.injected_skipped_count == len(injected)
    assert response.persisted_count == 2

    compacted = await host.compact()
    cp = compacted.checkpoint
    assert compacted.compacted and cp.status == Status.CHECKPOINT_STATUS_COMPLETED, compacted
    expanded = await host.expand(cp.checkpoint_id)
    texts = [envelope_text(t.turn) for t in expanded.turns]
    assert texts[-2:] == [prompt, "Project X moves to PostgreSQL 16."]
    for turn in expanded.turns:
        assert not turn.turn.host_message_id.startswith("ce-injected-"), turn.turn
        text = envelope_text(turn.turn)
        assert SUMMARY_HEADER not in text and "memory_recall_auto" not in text, text
    # Everything the host sent that was its own is there, once.
    own = [m.id for m in host.transcript if not is_injected(m)]
    persisted_ids = [t.turn.host_message_id for t in expanded.turns]
    assert len(persisted_ids) == len(set(persisted_ids))
    assert set(persisted_ids) <= set(own)


async def test_explicit_and_automatic_memories_coexist(llm_engine: Stubs) -> None:
    """§11.2: "remember I prefer dark theme" is stored at once through StoreMemory (memory_store)
    and recallable right away; a later ordinary decision reaches long-term memory at compaction;
    both are recalled, and nothing is recalled twice."""
    user = new_user_id("coexist")
    host = HostSession(llm_engine, ACCOUNT, user, session=f"s-{uuid.uuid4().hex[:6]}")
    preference = "Remember that I prefer dark theme in every editor."
    stored = await host.store(preference)
    assert stored.created and "/memories/" in stored.uri
    again = await host.store(preference)
    assert (again.created, again.uri) == (False, stored.uri)
    right_away = await host.recall("which theme do I like?")
    assert stored.uri in [m.uri for m in right_away.memories]

    # The host's transcript of that exchange, as OpenClaw keeps it: the memory_store tool call.
    await host.turn(
        preference,
        "Stored: you prefer dark theme.",
        [("memory_store", {"text": preference}, json.dumps({"uri": stored.uri, "created": True}))],
    )
    await host.turn("Can you list the open pull requests?", "There are three open pull requests.")
    decision = "We decided to ship the mobile app release on April 3."
    await host.turn(decision, "Noted: the mobile app ships on April 3.")
    compacted = await host.compact()
    cp = compacted.checkpoint
    assert compacted.compacted and cp.status == Status.CHECKPOINT_STATUS_COMPLETED, compacted
    events = [u for u in cp.extracted_memory_uris if "/memories/events/" in u]
    assert events, cp.extracted_memory_uris

    recalled = []
    for query in ("which theme do I prefer?", "when do we ship the mobile app release?"):
        response = await host.recall(query)
        assert not response.degraded
        recalled.extend(response.memories)
    uris = [m.uri for m in recalled]
    assert stored.uri in uris
    assert any(u in events for u in uris), uris
    # Within each recall no two memories carry the same content, and none appears twice.
    for query in ("which theme do I prefer?", "when do we ship the mobile app release?"):
        memories = [m for m in recalled if m.query == query]
        contents = [" ".join(m.content.split()) for m in memories]
        assert len(contents) == len(set(contents)), contents
        assert len([m.uri for m in memories]) == len({m.uri for m in memories})
    # Note: the stand-in also extracts the user's own "Remember that I prefer ..." line at
    # compaction (as a preference and as an entity card, in its own wording); a real LLM merges
    # those with the explicit memory, the stand-in does not, so distinct URIs may say the same
    # thing in different words. Only identical content counts as a duplicate here.
