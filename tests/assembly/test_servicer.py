"""AssemblyService on a real in-process gRPC server against the real local OpenViking.

Slow OpenViking is a lookalike HTTP server (a real server answering late), reached by the real
client; everything else runs against the session's OpenViking with memories seeded per test.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator

import grpc
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
    packet_pb2,
)
from grpc import aio

from services.assembly.assemble import retrieval_deadline
from services.assembly.summaries import SUMMARY_RECHECK_SECONDS, CheckpointSummaries, stream_checkpoints
from shared.config import Settings, load_settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.identity import request_identity
from shared.domain.memory_scope import AGENT, scope_tags
from shared.domain.stream_state import StreamStateStore
from shared.domain.turn_index import is_turn_uri
from shared.openviking import DevAuth, OpenVikingClient, RetryPolicy, Tenant
from shared.runtime.main import start_host
from shared.telemetry import openviking_route
from tests.assembly.conftest import assembly_channel, assembly_stub
from tests.assembly.helpers import (
    ACCOUNT,
    RequestRecorder,
    assistant,
    seed,
    tool_result,
    unique_tenant,
    user,
)
from tests.support.lookalike_openviking import LookalikeOpenViking
from tests.support.stack import OpenVikingEndpoint, OpenVikingWithLlm

MEM = "viking://~/memories"
IDENTITY = common_pb2.Identity(account_id=ACCOUNT, user_id="alice", agent_id="main", session_id="s1")
SETTINGS = Settings(shutdown_grace_seconds=0.1, recall_timeout_ms=300, recent_raw_turn_count=2)
RECALL_SETTINGS = SETTINGS.model_copy(update={"recall_timeout_ms": 30_000})


def transcript() -> list[common_pb2.ConversationMessage]:
    return [
        user("what is the capital of france"),
        assistant("Paris."),
        user("list my files please"),
        assistant("", [("c1", "ls")]),
        tool_result("c1", "a.txt b.txt"),
        assistant("a.txt and b.txt"),
        user("which text editor do I prefer for coding"),
    ]


@pytest.fixture
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield client


FACT = [user("My flight to Lisbon leaves on May 3."), assistant("Noted: Lisbon on May 3.")]


def identity_of(tenant: Tenant, session: str = "s1") -> common_pb2.Identity:
    return common_pb2.Identity(
        account_id=tenant.account_id, user_id=tenant.user_id, agent_id="main", session_id=session
    )


async def seed_user(client: OpenVikingClient, tenant: Tenant) -> None:
    await seed(
        client,
        tenant,
        {
            f"{MEM}/preferences/editor.md": "User prefers vim for coding",
            f"{MEM}/notes/n.md": ("Agent note: user codes in rust", scope_tags(AGENT, "main")),
            f"{MEM}/notes/other.md": ("Agent note: user edits code in emacs", scope_tags(AGENT, "else")),
            f"{MEM}/profile.md": "Alice, a backend engineer.",
        },
    )


def test_retrieval_deadline() -> None:
    assert retrieval_deadline(100.0, None, 5000) == 105.0
    assert retrieval_deadline(100.0, 1.0, 5000) == pytest.approx(100.8)
    assert retrieval_deadline(100.0, 0.0, 5000) == pytest.approx(100.01)


async def _summary_reads(base_url: str, who: common_pb2.Identity) -> list[tuple[list[str], list[str]]]:
    """The OpenViking routes each of three summary lookups of `who`'s stream reads, with the
    overviews it found: two in a row, then one after the remembered summary is due to be
    checked again."""
    recorder = RequestRecorder()
    identity = request_identity(
        who, load_settings(environ={}, overrides={"baseUrl": base_url}), session_required=True
    )
    now = [0.0]
    reads: list[tuple[list[str], list[str]]] = []
    async with OpenVikingClient(base_url, DevAuth(), middlewares=[recorder]) as client:
        documents = DocumentStore(client)
        summaries = CheckpointSummaries(
            CheckpointStore(documents), stream_checkpoints(StreamStateStore(documents)), clock=lambda: now[0]
        )
        for elapsed in (0.0, 1.0, SUMMARY_RECHECK_SECONDS + 1.0):
            now[0] = elapsed
            recorder.requests.clear()
            found = await summaries.latest_summaries(identity, time.monotonic() + 30)
            reads.append(([openviking_route(r.path) for r in recorder.requests], [s.overview for s in found]))
    return reads


DOCUMENT_READ = "/api/v1/content/read"
"""The stream state and each checkpoint are engine documents."""


@pytest.mark.stack
async def test_a_settled_compaction_without_llm_shows_the_engine_summary_read_once(
    openviking: OpenVikingEndpoint,
) -> None:
    """No LLM: OpenViking's overview is a count-only placeholder, so the checkpoint's summary is
    the engine's own. Once its compaction has settled nothing will replace it, so the checkpoint
    is read once, not on every Assemble (until the recheck)."""
    who = identity_of(unique_tenant("nosum"), f"host-{uuid.uuid4().hex[:6]}")
    settings = load_settings(
        environ={}, overrides={"baseUrl": openviking.base_url, "grpcPort": 0, "shutdownGraceSeconds": 0.1}
    )
    host = await start_host(settings, "all", port=0)
    try:
        async with aio.insecure_channel(host.address) as channel:
            await capture_pb2_grpc.CaptureServiceStub(channel).AfterTurn(
                capture_pb2.AfterTurnRequest(identity=who, messages=FACT), timeout=60
            )
            compacted = await compaction_pb2_grpc.CompactionServiceStub(channel).Compact(
                compaction_pb2.CompactRequest(
                    identity=who, force=True, trigger=checkpoint_pb2.COMPACTION_TRIGGER_HOST_REQUEST
                ),
                timeout=120,
            )
        assert compacted.checkpoint.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED, compacted
        reads = await _summary_reads(openviking.base_url, who)
    finally:
        await host.stop()
    # The user's words, not the assistant's echo of them (they add nothing).
    assert compacted.summary == "U: My flight to Lisbon leaves on May 3.", compacted.summary
    shown = [compacted.summary]
    assert reads == [([DOCUMENT_READ] * 2, shown), ([DOCUMENT_READ], shown), ([DOCUMENT_READ] * 2, shown)]


@pytest.mark.stack
@pytest.mark.llm
async def test_assemble_injects_recall_profile_and_summary(openviking_llm: OpenVikingWithLlm) -> None:
    """The whole engine in one process: capture stores the first turn, compaction commits it
    (OpenViking summarises it with the stand-in LLM), then Assemble injects the real summary,
    the profile and the recalled memories."""
    tenant = unique_tenant("full")
    who = identity_of(tenant, f"host-{uuid.uuid4().hex[:6]}")
    settings = load_settings(
        environ={},
        overrides={
            "baseUrl": openviking_llm.base_url,
            "grpcPort": 0,
            "shutdownGraceSeconds": 0.1,
            "timeoutMs": 60_000,
            "recallTimeoutMs": 30_000,
            "recentRawTurnCount": 2,
            "compactTaskTimeoutMs": 150_000,
        },
    )
    host = await start_host(settings, "all", port=0)
    channel = aio.insecure_channel(host.address)
    try:
        async with OpenVikingClient(openviking_llm.base_url, DevAuth()) as client:
            await seed_user(client, tenant)
        first_turn = transcript()[:2]
        captured = await capture_pb2_grpc.CaptureServiceStub(channel).AfterTurn(
            capture_pb2.AfterTurnRequest(identity=who, messages=first_turn), timeout=60
        )
        assert captured.persisted_count == 2
        compacted = await compaction_pb2_grpc.CompactionServiceStub(channel).Compact(
            compaction_pb2.CompactRequest(
                identity=who, force=True, trigger=checkpoint_pb2.COMPACTION_TRIGGER_HOST_REQUEST
            ),
            timeout=180,
        )
        assert compacted.checkpoint.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED, compacted
        assert compacted.summary
        reply = await assembly_pb2_grpc.AssemblyServiceStub(channel).Assemble(
            assembly_pb2.AssembleRequest(identity=who, messages=transcript()), timeout=60
        )
        summary_reads = await _summary_reads(openviking_llm.base_url, who)
    finally:
        await channel.close()
        await host.stop()
    # The finished checkpoint's summary is final: read once, then remembered (only the stream
    # state, which names the checkpoints, is read again) until it is due to be checked again.
    assert [routes for routes, _ in summary_reads] == [
        [DOCUMENT_READ, DOCUMENT_READ],
        [DOCUMENT_READ],
        [DOCUMENT_READ, DOCUMENT_READ],
    ]
    assert all(
        len(overviews) == 1 and compacted.summary.strip() in overviews[0] for _, overviews in summary_reads
    ), summary_reads
    packet = reply.packet
    assert not packet.degraded, packet.degraded_reasons
    assert packet.recall_query.endswith("which text editor do I prefer for coding")
    # The agent's note and the user's memories; never another agent's, and the preference is in
    # the profile (so left out of recall).
    recalled = {m.uri.rsplit("/", 1)[1]: m for m in packet.recalled_memories if m.kind == "memory"}
    assert "n.md" in recalled and recalled["n.md"].scope == packet_pb2.MEMORY_SCOPE_AGENT
    # profile.md is in the profile block, so it is never recalled a second time.
    assert set(recalled) == {"n.md"}, list(recalled)
    # Besides memories, only raw exchanges from the turn index (the compacted first one may be
    # among them: it is not shown raw), each dated.
    turns = [m for m in packet.recalled_memories if m.kind != "memory"]
    assert all(m.kind == "turn" and is_turn_uri(m.uri) and m.said_at for m in turns), turns
    assert all(f"/user/{tenant.user_id}/" in m.uri for m in packet.recalled_memories)
    assert reply.system_prompt_addition.startswith("[User Profile]\nAlice, a backend engineer.")
    assert "- [preferences] User prefers vim for coding" in reply.system_prompt_addition
    texts = [m.content[0].text.text if m.content[0].HasField("text") else "" for m in reply.messages]
    # Summary first (the compacted turn's archive overview), then the 2 newest raw turns (the
    # older turn is replaced by the summary), then the recall pair right after the newest user
    # message.
    assert texts[0].startswith("[Session History Summary]\n")
    assert compacted.summary.strip() in texts[0]
    assert [m.role for m in reply.messages[1:5]] == [1, 2, 3, 2]
    call, result = reply.messages[-2:]
    assert call.content[0].tool_call.name == "memory_recall_auto"
    assert result.content[0].tool_result.tool_call_id == call.content[0].tool_call.id
    payload = json.loads(result.content[0].tool_result.content[0].text.text)
    assert payload["source"] == "openviking-auto-recall"
    assert len(payload["memories"]) == len(packet.recalled_memories) >= 1
    assert len(packet.recent_raw_turns) == 5 and len(packet.injected_messages) == 3
    assert reply.estimated_tokens == packet.tokens.used <= settings.default_token_budget


async def test_slow_backend_degrades_but_keeps_raw_turns() -> None:
    with LookalikeOpenViking(delay=2.0) as slow:
        async with (
            OpenVikingClient(slow.base_url, DevAuth(), retry=RetryPolicy(max_attempts=1)) as client,
            assembly_stub(SETTINGS, client) as stub,
        ):
            started = time.monotonic()
            reply = await stub.Assemble(
                assembly_pb2.AssembleRequest(identity=IDENTITY, messages=transcript(), token_budget=1000)
            )
            assert time.monotonic() - started < 1.5
    assert reply.packet.degraded and any("timed out" in r for r in reply.packet.degraded_reasons)
    assert not reply.packet.recalled_memories
    # No summaries came back, so nothing stands in for the older turns: the whole transcript.
    assert list(reply.messages) == transcript()
    assert not reply.packet.tokens.over_budget and reply.packet.tokens.used <= 1000


@pytest.mark.stack
async def test_recall_off_no_retrieval(openviking: OpenVikingEndpoint) -> None:
    transport = RequestRecorder()
    tenant = unique_tenant("off")
    settings = SETTINGS.model_copy(update={"auto_recall": False})
    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[transport]) as client:
        await seed_user(client, tenant)
        transport.requests.clear()
        async with assembly_stub(settings, client) as stub:
            reply = await stub.Assemble(
                assembly_pb2.AssembleRequest(identity=identity_of(tenant), messages=transcript())
            )
    assert transport.finds() == [] and reply.packet.recall_skip_reason == "auto_recall_disabled"
    assert list(reply.messages) == transcript() and not reply.packet.degraded


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (assembly_pb2.AssembleRequest(identity=IDENTITY, token_budget=-1), "token_budget"),
        (assembly_pb2.AssembleRequest(identity=common_pb2.Identity(session_id="s")), "identity.user_id"),
        (
            assembly_pb2.AssembleRequest(identity=IDENTITY, messages=[common_pb2.ConversationMessage()]),
            "messages[0].role",
        ),
        (
            assembly_pb2.AssembleRequest(identity=IDENTITY, messages=[user("x"), tool_result("", "r")]),
            "messages[1].content[0].tool_result.tool_call_id",
        ),
    ],
)
@pytest.mark.stack
async def test_invalid_requests_name_the_field(
    ov: OpenVikingClient, request_: assembly_pb2.AssembleRequest, field: str
) -> None:
    async with assembly_stub(SETTINGS, ov) as stub:
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.Assemble(request_)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith(field + ":")


@pytest.mark.stack
async def test_recall_memories_and_fallback(ov: OpenVikingClient) -> None:
    tenant = unique_tenant("explicit")
    await seed_user(ov, tenant)
    await seed(ov, tenant, {f"{MEM}/entities/laptop.md": "User codes on a ThinkPad laptop"})
    who = identity_of(tenant)
    async with assembly_stub(RECALL_SETTINGS, ov) as stub:
        everything = await stub.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=who, query="preferred editor for coding")
        )
        assert len(everything.memories) > 1 and not everything.degraded
        reply = await stub.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=who, query="preferred editor for coding", limit=1)
        )
        assert len(reply.memories) == 1 and not reply.degraded
        assert json.loads(reply.tool_result.json)["source"] == "openviking-recall"
        assert all("/notes/other.md" not in m.uri for m in everything.memories)  # another agent's
        fallback = await stub.RecallFallback(
            assembly_pb2.RecallFallbackRequest(identity=who, prompt="which editor do I prefer")
        )
        assert fallback.prepend_context.startswith("<relevant-memories>\n")
        assert "- [preferences] User prefers vim for coding" in fallback.prepend_context
        assert fallback.estimated_tokens > 0
        greeting = await stub.RecallFallback(assembly_pb2.RecallFallbackRequest(identity=who, prompt="hi"))
        assert greeting.prepend_context == ""
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.RecallMemories(assembly_pb2.RecallMemoriesRequest(identity=who, query=" "))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.RecallMemories(
                assembly_pb2.RecallMemoriesRequest(identity=who, query="editor", limit=101)
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (caught.value.details() or "").startswith("limit:")
    disabled = RECALL_SETTINGS.model_copy(update={"fallback_recall_enabled": False})
    async with assembly_stub(disabled, ov) as stub:
        with pytest.raises(aio.AioRpcError) as caught:
            await stub.RecallFallback(assembly_pb2.RecallFallbackRequest(identity=who, prompt="x"))
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION


@pytest.mark.stack
async def test_a_message_that_does_not_decode_is_named(ov: OpenVikingClient) -> None:
    """Host messages arrive as wire bytes; one that is no ConversationMessage is refused by index."""
    wire = assembly_pb2.AssembleRequest(identity=IDENTITY, messages=[user("hello")]).SerializeToString()
    broken = wire + b"\x12\x03\xff\xff\xff"  # messages (field 2), 3 bytes that are no message
    async with assembly_channel(SETTINGS, ov) as channel:
        assemble = channel.unary_unary(
            "/contextengine.v1.AssemblyService/Assemble",
            request_serializer=lambda data: data,
            response_deserializer=assembly_pb2.AssembleResponse.FromString,
        )
        with pytest.raises(aio.AioRpcError) as caught:
            await assemble(broken)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (caught.value.details() or "").startswith("messages[1]:")
        reply = await assemble(wire)
    assert [m.content[0].text.text for m in reply.messages] == ["hello"]
