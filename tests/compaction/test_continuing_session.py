"""A continuing session keeps its own past without an LLM, on the real stack: capture stores a
long generated session, Compact commits it (OpenViking writes only a count-only placeholder),
and the engine's extractive summary stands in for the compacted turns in Assemble, naming the
checkpoint and archive that `memory_expand` takes back to the exact raw turns."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    checkpoint_pb2,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)
from grpc import aio

from services.compaction.key_terms import capitalised_mid_sentence, key_terms
from shared.config import Settings, load_settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.envelope import texts_of
from shared.domain.identity import request_identity
from shared.domain.turn_index import turn_uri
from shared.openviking import DevAuth, OpenVikingClient
from shared.runtime.main import start_host
from shared.runtime.server import ServiceHost
from tests.compaction.long_session import generated_exchanges, host_messages
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

ACCOUNT = f"ce-cont-{uuid.uuid4().hex[:8]}"
EXCHANGES = 40


def _identity() -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=ACCOUNT, user_id=f"u-{uuid.uuid4().hex[:6]}", agent_id="main", session_id="s1"
    )


@dataclass(frozen=True)
class Engine:
    host: ServiceHost
    settings: Settings

    @property
    def address(self) -> str:
        return self.host.address


@pytest.fixture(scope="module")
async def host(openviking: OpenVikingEndpoint) -> AsyncIterator[Engine]:
    settings = load_settings(
        environ={},
        overrides={
            "baseUrl": openviking.base_url,
            "grpcPort": 0,
            "shutdownGraceSeconds": 0.1,
            "timeoutMs": 60_000,
            "recentRawTurnCount": 2,
            "compactTurnThreshold": 10_000,  # only the explicit Compact below compacts
            "compactTokensAddedThreshold": 10_000_000,
            "memoryExpandMaxResults": 100,
        },
    )
    running = await start_host(settings, "all", port=0)
    try:
        yield Engine(running, settings)
    finally:
        await running.stop()


def _text(message: common_pb2.ConversationMessage) -> str:
    return "\n".join(texts_of(message))


async def test_the_compacted_part_is_in_the_context_and_expands_to_its_raw_turns(host: Engine) -> None:
    who = _identity()
    exchanges = generated_exchanges(EXCHANGES)
    compacted = host_messages(exchanges)
    async with aio.insecure_channel(host.address) as channel:
        await capture_pb2_grpc.CaptureServiceStub(channel).AfterTurn(
            capture_pb2.AfterTurnRequest(identity=who, messages=compacted), timeout=120
        )
        compaction = compaction_pb2_grpc.CompactionServiceStub(channel)
        done = await compaction.Compact(
            compaction_pb2.CompactRequest(
                identity=who, force=True, trigger=checkpoint_pb2.COMPACTION_TRIGGER_HOST_REQUEST
            ),
            timeout=180,
        )
        assert done.compacted and done.checkpoint.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED, done
        cp = done.checkpoint
        # The answer carries the engine's summary (no LLM wrote one) before the newest raw turns.
        assert done.summary and _text(done.messages[0]).endswith(done.summary)

        later = host_messages(generated_exchanges(2, seed=99, social_share=1.0), start=len(compacted))
        question = common_pb2.ConversationMessage(
            role=common_pb2.MESSAGE_ROLE_USER,
            content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text="Remind me what I told you."))],
        )
        reply = await assembly_pb2_grpc.AssemblyServiceStub(channel).Assemble(
            assembly_pb2.AssembleRequest(
                identity=who, messages=[*compacted, *later, question], token_budget=1500
            ),
            timeout=60,
        )
        packet = reply.packet
        assert not packet.degraded, packet.degraded_reasons
        [summary] = packet.compact_summaries
        assert (summary.checkpoint_id, summary.archive_uri) == (cp.checkpoint_id, cp.archive_uri)
        assert summary.overview == done.summary
        assert packet.tokens.summaries > 0 and packet.tokens.used <= 1500
        shown = _text(reply.messages[0])
        assert shown.startswith("[Session History Summary]\n") and summary.overview in shown
        assert f'memory_expand("{cp.checkpoint_id}")' in shown

        # The key turns' names, numbers and dates are in it; the small talk is not.
        facts = [e for e in exchanges if e.fact]
        said = [text for e in facts for text in (e.user, e.assistant)]
        known = capitalised_mid_sentence(said)
        terms = [key_terms(e.user, known) for e in facts]
        lowered = summary.overview.lower()
        names = {n for t in terms for n in t.names}
        assert sum(n in lowered for n in names) >= 0.75 * len(names)
        assert any(n in lowered for t in terms for n in t.numbers) and any(
            d in lowered for t in terms for d in t.dates
        )
        days = {e.said_at.date().isoformat() for e in facts}
        assert {line for line in summary.overview.splitlines() if line[:4] == "2026"} <= days
        assert not any(e.user in summary.overview for e in exchanges if not e.fact)

        # Its references lead back to the exact compacted host messages, from the archive.
        archived = f"{cp.archive_uri}/messages.jsonl"
        for reference in (summary.checkpoint_id, summary.archive_uri):
            expanded = await compaction.ExpandMemory(
                compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=reference, limit=100),
                timeout=60,
            )
            assert [t.message for t in expanded.turns] == compacted, reference
            assert expanded.checkpoint_id == cp.checkpoint_id
            assert list(expanded.readable_uris) == [archived]
            assert {t.source_uri for t in expanded.turns} == {archived}

        # The stored checkpoint records what its summary keeps of the archived turns.
        identity = request_identity(who, load_settings(environ={}), session_required=True)
        async with OpenVikingClient(host.settings.base_url, DevAuth()) as client:
            record = await CheckpointStore(DocumentStore(client)).read(identity.tenant, cp.checkpoint_id)
        assert record is not None and record.engine_summary is not None
        stored = record.engine_summary
        assert stored.text == summary.overview and stored.covers_turns == len(compacted)
        assert stored.tokens <= host.settings.compact_summary_max_tokens
        assert set(stored.kept_terms) == {"names", "numbers", "dates"}
        assert 0 < stored.kept_terms["names"] <= len(stored.source_terms["names"])


async def test_a_recalled_exchange_expands_from_where_it_was_archived(host: Engine) -> None:
    """Issue 32 item 4: after the compaction, the exchange's messages come from the archive (the
    live messages.jsonl reads as empty) and name their checkpoint."""
    who = _identity()
    messages = host_messages(generated_exchanges(3, social_share=0.0))
    async with aio.insecure_channel(host.address) as channel:
        await capture_pb2_grpc.CaptureServiceStub(channel).AfterTurn(
            capture_pb2.AfterTurnRequest(identity=who, messages=messages), timeout=120
        )
        compaction = compaction_pb2_grpc.CompactionServiceStub(channel)
        done = await compaction.Compact(compaction_pb2.CompactRequest(identity=who, force=True), timeout=180)
        cp = done.checkpoint
        reference = turn_uri(cp.session_id, 2)  # the second exchange, as recall shows it
        expanded = await compaction.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=reference), timeout=60
        )
    archived = f"{cp.archive_uri}/messages.jsonl"
    assert [t.message for t in expanded.turns] == messages[2:4]
    assert {t.source_uri for t in expanded.turns} == {archived}
    assert list(expanded.readable_uris) == [archived]
    assert expanded.checkpoint_id == cp.checkpoint_id


async def test_many_compactions_show_one_earlier_summary_that_expands_to_every_raw_turn(host: Engine) -> None:
    """Issue 31 item 5: with more checkpoints than Assemble shows one by one, the summary of the
    older ones comes first, and its reference leads to all of their raw turns, exactly."""
    who = _identity()
    transcript: list[common_pb2.ConversationMessage] = []
    checkpoints: list[checkpoint_pb2.CompactCheckpoint] = []
    async with aio.insecure_channel(host.address) as channel:
        capture = capture_pb2_grpc.CaptureServiceStub(channel)
        compaction = compaction_pb2_grpc.CompactionServiceStub(channel)
        for round_ in range(5):
            new = host_messages(generated_exchanges(4, seed=round_, social_share=0.25), start=len(transcript))
            await capture.AfterTurn(
                capture_pb2.AfterTurnRequest(
                    identity=who, messages=[*transcript, *new], pre_prompt_message_count=len(transcript)
                ),
                timeout=120,
            )
            transcript += new
            done = await compaction.Compact(
                compaction_pb2.CompactRequest(identity=who, force=True), timeout=180
            )
            assert done.checkpoint.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED, done
            checkpoints.append(done.checkpoint)
        reply = await assembly_pb2_grpc.AssemblyServiceStub(channel).Assemble(
            assembly_pb2.AssembleRequest(identity=who, messages=transcript, token_budget=4000), timeout=60
        )
        ids = [c.checkpoint_id for c in checkpoints]
        summaries = list(reply.packet.compact_summaries)
        earlier = f"{ids[2]}/earlier"
        assert [s.checkpoint_id for s in summaries] == [earlier, *ids[2:]]
        assert f'memory_expand("{earlier}")' in _text(reply.messages[0])
        expanded = await compaction.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(identity=who, summary_or_memory_uri=earlier, limit=100),
            timeout=60,
        )
    assert [t.message for t in expanded.turns] == transcript[:16]  # the first two compactions' turns
    assert {t.source_uri for t in expanded.turns} == {
        f"{c.archive_uri}/messages.jsonl" for c in checkpoints[:2]
    }
    assert expanded.checkpoint_id == ids[0]
