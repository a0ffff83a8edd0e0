"""CompactionService against OpenViking wired to the stand-in LLM: summaries, memories, failures."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from contextengine.v1 import checkpoint_pb2, common_pb2, compaction_pb2

from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.finalisation import finalise
from shared.domain.stream_state import InflightCompaction
from tests.compaction.helpers import (
    StreamWriter,
    compact_request,
    conversation,
    replica,
    settings_for,
    settled,
    start_replica,
)
from tests.support.stack import OpenVikingWithLlm

pytestmark = [pytest.mark.stack, pytest.mark.llm]

RUN = uuid.uuid4().hex[:8]
ACCOUNT = f"ce-cmpllm-{RUN}"
Status = checkpoint_pb2.CheckpointStatus
PREFERENCE = "I prefer tabs over spaces in every Go file."
DECISION = "We decided to deploy the billing service on Fridays."


def identity(session: str) -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id="erin", agent_id="main", session_id=session)


INFLIGHT_DRAIN_SECONDS = 30.0
"""A finaliser drops the inflight entry right after it writes the checkpoint COMPLETED, which a
GetCheckpoint poll may see first; this only bounds a broken one."""


async def drained_inflight(writer: StreamWriter) -> list[InflightCompaction]:
    """The stream's inflight list once it is empty, or as it still is after the bound."""
    give_up = time.monotonic() + INFLIGHT_DRAIN_SECONDS
    while True:
        inflight = list((await writer.state()).inflight)
        if not inflight or time.monotonic() > give_up:
            return inflight
        await asyncio.sleep(0.1)


def long_conversation() -> list[str]:
    lines: list[str] = []
    for i in range(8):
        lines += [f"Step {i}: look at module m{i} of the billing service.", f"Module m{i} looks fine."]
    lines[6] = PREFERENCE
    lines[10] = DECISION
    return lines


async def test_long_conversation_compacts_with_summary_memories_and_provenance(
    openviking_llm: OpenVikingWithLlm,
) -> None:
    async with replica(settings_for(openviking_llm.base_url)) as service:
        who = identity(f"host-{uuid.uuid4().hex[:6]}")
        writer = StreamWriter(service.openviking, who)
        lines = long_conversation()
        await writer.append(conversation(lines))

        response = await service.stub.Compact(compact_request(who), timeout=180)

        cp = response.checkpoint
        assert response.compacted and cp.status == Status.CHECKPOINT_STATUS_COMPLETED, (response.reason, cp)
        assert (cp.source_turn_range.start_sequence, cp.source_turn_range.end_sequence) == (0, len(lines) - 1)
        assert cp.extracted_memory_uris, cp
        preference_uris = [u for u in cp.extracted_memory_uris if "/memories/preferences/" in u]
        assert preference_uris, cp.extracted_memory_uris
        # The working context: the summary as an engine-injected message, then the newest raw turns.
        assert "## Key Facts & Decisions" in response.summary
        head = response.messages[0]
        assert head.id.startswith("ce-injected-")
        assert head.host_fields.json == '{"contextengine_injected": "compact_summary"}'
        assert head.content[0].text.text == "[Session History Summary]\n" + response.summary
        assert list(response.messages[1:]) == writer.written[-4:]
        assert response.tokens_after > 0

        # From the summary back to the exact raw turns.
        expected = [writer.envelope(i, cp.session_id) for i in range(len(lines))]
        from_summary = await service.stub.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=cp.summary_uri), timeout=60
        )
        assert [t.turn for t in from_summary.turns] == expected
        assert cp.archive_uri + "/.overview.md" in from_summary.readable_uris

        # From an extracted memory back to the turn that produced it (ranked by the memory's text).
        from_memory = await service.stub.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(
                identity=who, summary_or_memory_uri=preference_uris[0], limit=3
            ),
            timeout=60,
        )
        assert from_memory.checkpoint_id == cp.checkpoint_id
        assert from_memory.turns[0].turn == expected[6]
        assert from_memory.turns[0].turn.parts[0].text.text == PREFERENCE
        assert cp.archive_uri in from_memory.linked_uris

        # Provenance document and memory tags.
        store = CheckpointStore(DocumentStore(service.openviking))
        tenant = writer.identity.tenant
        provenance = await store.read_provenance(tenant, preference_uris[0])
        assert provenance is not None
        source = provenance.sources[-1]
        assert (source.checkpoint_id, source.session_id, source.archive_uri) == (
            cp.checkpoint_id,
            cp.session_id,
            cp.archive_uri,
        )
        assert (source.start_sequence, source.end_sequence) == (0, len(lines) - 1)
        attrs = await service.openviking.attrs(tenant, preference_uris[0])
        assert f"ce_checkpoint={cp.checkpoint_id}" in attrs.tags
        assert f"ce_session={cp.session_id}" in attrs.tags

        # Finalising again is a no-op.
        stored = await store.read(tenant, cp.checkpoint_id)
        assert stored is not None
        again = await finalise(service.openviking, tenant, stored)
        assert again.status == Status.CHECKPOINT_STATUS_COMPLETED
        assert again.extracted_memory_uris == list(cp.extracted_memory_uris)


async def test_commit_failure_keeps_raw_turns_and_the_next_compaction_proceeds(
    openviking_llm: OpenVikingWithLlm,
) -> None:
    async with replica(settings_for(openviking_llm.base_url)) as service:
        who = identity(f"host-{uuid.uuid4().hex[:6]}")
        writer = StreamWriter(service.openviking, who)
        lines = [
            "I prefer dark mode in the terminal.",
            "Dark mode noted.",
            "Check the logs.",
            "Logs are clean.",
        ]
        await writer.append(conversation(lines))
        openviking_llm.llm.fail = True
        try:
            failed = await service.stub.Compact(compact_request(who), timeout=180)
        finally:
            openviking_llm.llm.fail = False

        cp = failed.checkpoint
        assert failed.compacted and cp.status == Status.CHECKPOINT_STATUS_FAILED, cp
        assert cp.failure_reason
        assert list(failed.messages) == writer.written[-4:]  # no summary, raw turns intact
        state = await writer.state()
        assert state.inflight == [] and state.turns_since_compaction == 0

        expanded = await service.stub.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=cp.checkpoint_id),
            timeout=60,
        )
        assert [t.turn for t in expanded.turns] == [writer.envelope(i, cp.session_id) for i in range(4)]

        await writer.append(
            conversation(["We decided to keep the logs for 30 days.", "30 days it is."], start=4)
        )
        recovered = await service.stub.Compact(compact_request(who), timeout=180)
        assert recovered.checkpoint.status == Status.CHECKPOINT_STATUS_COMPLETED, recovered.checkpoint
        turn_range = recovered.checkpoint.source_turn_range
        assert (turn_range.start_sequence, turn_range.end_sequence) == (4, 5)
        listed = await service.stub.ListCheckpoints(
            compaction_pb2.ListCheckpointsRequest(identity=who), timeout=30
        )
        assert [c.status for c in listed.checkpoints] == [
            Status.CHECKPOINT_STATUS_COMPLETED,
            Status.CHECKPOINT_STATUS_FAILED,
        ]


async def test_background_compaction_of_a_stopped_replica_is_finished_by_another(
    openviking_llm: OpenVikingWithLlm,
) -> None:
    """Finding 1: a compaction handed off to a replica that stops (its caller gone too) is not
    abandoned: the hand-off is durable and another replica owns it to COMPLETED."""
    settings = settings_for(openviking_llm.base_url)
    first = await start_replica(settings)
    who = identity(f"host-{uuid.uuid4().hex[:6]}")
    writer = StreamWriter(first.openviking, who)
    await writer.append(conversation(long_conversation()))
    try:
        pending = await first.stub.Compact(compact_request(who, background=True), timeout=60)
    finally:
        await first.stop()  # its worker stops and releases the lease, wherever it was
    cp = pending.checkpoint
    assert pending.compacted and cp.status == Status.CHECKPOINT_STATUS_PENDING, cp
    assert list(pending.messages) == []
    async with replica(settings) as second:
        tenant = writer.identity.tenant
        store = CheckpointStore(DocumentStore(second.openviking))
        stored = await store.read(tenant, cp.checkpoint_id)
        assert stored is not None and stored.status == Status.CHECKPOINT_STATUS_PENDING
        assert [
            entry.checkpoint_id for entry in (await StreamWriter(second.openviking, who).state()).inflight
        ] == [cp.checkpoint_id]
        observed = await settled(second.stub, who, cp.checkpoint_id)
        assert observed.status == Status.CHECKPOINT_STATUS_COMPLETED, observed
        assert observed.archive_index == 1 and observed.extracted_memory_uris
        assert await drained_inflight(StreamWriter(second.openviking, who)) == []
        # Concurrent finalisers agree.
        done = await store.read(tenant, cp.checkpoint_id)
        assert done is not None
        results = await asyncio.gather(*(finalise(second.openviking, tenant, done) for _ in range(3)))
        assert {r.status for r in results} == {Status.CHECKPOINT_STATUS_COMPLETED}


async def test_next_compact_finishes_a_stale_inflight_compaction(openviking_llm: OpenVikingWithLlm) -> None:
    settings = settings_for(openviking_llm.base_url)
    first = await start_replica(settings)
    who = identity(f"host-{uuid.uuid4().hex[:6]}")
    writer = StreamWriter(first.openviking, who)
    await writer.append(conversation(["I prefer short commit messages.", "Short it is."]))
    try:
        pending = await first.stub.Compact(compact_request(who, background=True), timeout=60)
    finally:
        await first.stop()
    async with replica(settings) as second:
        await StreamWriter(second.openviking, who).append(
            conversation(["Run the linter.", "Linter is clean."], start=2)
        )
        after = await second.stub.Compact(compact_request(who), timeout=180)
        assert after.checkpoint.status == Status.CHECKPOINT_STATUS_COMPLETED
        earlier = await settled(second.stub, who, pending.checkpoint.checkpoint_id)
        assert earlier.status == Status.CHECKPOINT_STATUS_COMPLETED
        assert await drained_inflight(StreamWriter(second.openviking, who)) == []
