"""CaptureService on a real in-process gRPC server with the real local OpenViking behind it."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest
from contextengine.v1 import capture_pb2, checkpoint_pb2, common_pb2, compaction_pb2, packet_pb2
from grpc import aio

from services.capture.host_ids import READ_ALL_TOKEN_BUDGET
from shared.config import load_settings
from shared.domain.documents import DocumentStore
from shared.domain.envelope import persisted_turn, turn_envelope
from shared.domain.identity import parse_identity
from shared.domain.memory_scope import agent_key
from shared.domain.stream_state import StreamStateStore, session_id_for
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.runtime.context import build_openviking_client
from tests.capture.conftest import (
    CaptureHost,
    CaptureStack,
    checkpoint,
    new_identity,
    parsed,
    settled_checkpoint,
    stream_state,
)
from tests.capture.messages import assistant, conversation, injected_recall, user
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack


def after_turn(
    identity: common_pb2.Identity,
    messages: list[common_pb2.ConversationMessage],
    pre: int,
    *,
    token_budget: int = 0,
    is_heartbeat: bool = False,
) -> capture_pb2.AfterTurnRequest:
    return capture_pb2.AfterTurnRequest(
        identity=identity,
        messages=messages,
        pre_prompt_message_count=pre,
        token_budget=token_budget,
        is_heartbeat=is_heartbeat,
    )


async def stored_turns(
    ov: OpenVikingClient, identity: common_pb2.Identity, generation: int = 0
) -> list[tuple[int, common_pb2.ConversationMessage]]:
    parsed = parse_identity(identity, default_agent_id="default", session_required=True)
    states = StreamStateStore(DocumentStore(ov))
    if await states.load(parsed) is not None:
        await settled_stream_state(states, parsed)  # the last turn's append (after its answer) is done
    try:
        context = await ov.get_session_context(
            parsed.tenant, session_id_for(parsed.stream_id, generation), token_budget=READ_ALL_TOKEN_BUDGET
        )
    except BackendNotFound:
        return []
    turns = [persisted_turn(m) for m in context.messages]
    return [(t.sequence, t.message) for t in turns if t is not None]


async def play(
    host: CaptureHost,
    identity: common_pb2.Identity,
    transcript: list[common_pb2.ConversationMessage],
    boundaries: list[int],
) -> list[capture_pb2.AfterTurnResponse]:
    """Deliver the transcript turn by turn the way a host does (whole transcript each time)."""
    responses = []
    previous = 0
    for end in boundaries:
        responses.append(await host.stub.AfterTurn(after_turn(identity, transcript[:end], previous)))
        previous = end
    return responses


def user_boundaries(transcript: list[common_pb2.ConversationMessage]) -> list[int]:
    """Transcript lengths after each turn (a turn ends right before the next user message)."""
    starts = [i for i, m in enumerate(transcript) if m.role == common_pb2.MESSAGE_ROLE_USER]
    return [*starts[1:], len(transcript)]


async def test_multi_turn_conversation_round_trips_byte_for_byte(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    transcript = conversation(5)
    transcript[4:4] = injected_recall("rc1")  # auto recall injected before turn 2's user message
    transcript.append(
        user("<relevant-memories>\n- [prefs] dark\n</relevant-memories>\nand one more thing: use dark mode")
    )
    responses = await play(host, identity, transcript, user_boundaries(transcript))

    stored = await stored_turns(host.openviking, identity)
    expected = [(i, m) for i, m in enumerate(transcript) if not m.id.startswith("ce-injected-")]
    assert [s for s, _ in stored] == [s for s, _ in expected]
    for (_, got), (_, want) in zip(stored[:-1], expected[:-1], strict=True):
        assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    assert stored[-1][1].content[0].text.text == "and one more thing: use dark mode"
    assert sum(r.persisted_count for r in responses) == len(expected)
    # The injected recall pair (2 messages) and the stripped <relevant-memories> block (1).
    assert sum(r.injected_skipped_count for r in responses) == 3
    assert all(r.duplicate_count == 0 for r in responses)
    assert responses[-1].last_sequence == len(transcript) - 1
    assert responses[-1].estimated_tokens > 0
    assert responses[-1].capture_worthy
    assert "memory_recall_auto" not in str([m for _, m in stored])


async def test_injected_recall_is_recorded_as_the_answers_used_context(capture_stack: CaptureStack) -> None:
    """The recall pair itself is never stored; the memories it showed the model are recorded on
    the assistant message that answered, as OpenViking context parts (TurnEnvelope.used_context_uris)."""
    host = await capture_stack.start()
    identity = new_identity()
    transcript = [user("which theme do I like?"), *injected_recall("rc9"), assistant("You like dark theme.")]
    await host.stub.AfterTurn(after_turn(identity, transcript, 0))

    parsed = parse_identity(identity, default_agent_id="default", session_required=True)
    await stream_state(host.openviking, identity)  # settled: the append after the answer is done
    context = await host.openviking.get_session_context(
        parsed.tenant, session_id_for(parsed.stream_id, 0), token_budget=READ_ALL_TOKEN_BUDGET
    )
    turns = [t for t in map(persisted_turn, context.messages) if t is not None]
    assert [t.sequence for t in turns] == [0, 3]
    question, answer = (turn_envelope(t, openviking_session_id="s", agent_id="main") for t in turns)
    assert list(question.used_context_uris) == []
    assert [uri.rsplit("/memories/", 1)[1] for uri in answer.used_context_uris] == [
        "preferences/dark-theme.md"
    ]
    assert answer.used_context_uris[0].startswith(f"viking://user/{parsed.tenant.user_id}/")


async def test_self_healing_persists_everything_after_last_sequence(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    transcript = conversation(4)
    # The host's earlier AfterTurns never arrived: this one says only the last 2 are new.
    response = await host.stub.AfterTurn(after_turn(identity, transcript, len(transcript) - 2))
    assert response.persisted_count == len(transcript)
    again = await host.stub.AfterTurn(after_turn(identity, transcript, len(transcript) - 2))
    assert (again.persisted_count, again.duplicate_count) == (0, 2)
    assert [s for s, _ in await stored_turns(host.openviking, identity)] == list(range(len(transcript)))


async def test_duplicate_and_concurrent_delivery_across_two_replicas(capture_stack: CaptureStack) -> None:
    a, b = await capture_stack.start(), await capture_stack.start()
    identity = new_identity()
    transcript = conversation(8)
    ends = user_boundaries(transcript)
    calls = []
    previous = 0
    for end in ends:  # every turn delivered to both replicas, all at once, plus a retry
        request = after_turn(identity, transcript[:end], previous)
        calls += [a.stub.AfterTurn(request), b.stub.AfterTurn(request), a.stub.AfterTurn(request)]
        previous = end
    responses = await asyncio.gather(*calls)
    stored = await stored_turns(a.openviking, identity)
    assert [s for s, _ in stored] == list(range(len(transcript)))  # none lost, none doubled, in order
    for seq, message in stored:
        assert message == transcript[seq]
    assert sum(r.persisted_count for r in responses) == len(transcript)


async def test_bad_inputs_are_invalid_argument_naming_the_field_and_harm_nothing(
    capture_stack: CaptureStack,
) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    transcript = conversation(2)
    await host.stub.AfterTurn(after_turn(identity, transcript, 0))
    bad_role = [
        *transcript,
        common_pb2.ConversationMessage(
            content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text="x"))]
        ),
    ]
    no_user = common_pb2.Identity(session_id="s1")
    no_session = common_pb2.Identity(account_id="acme", user_id="alice")
    cases = {
        f"messages[{len(transcript)}].role": after_turn(identity, bad_role, len(transcript)),
        "pre_prompt_message_count": after_turn(identity, transcript, len(transcript) + 1),
        "identity.user_id": after_turn(no_user, transcript, 0),
        "identity.session_id": after_turn(no_session, transcript, 0),
        "token_budget": after_turn(identity, transcript, 0, token_budget=-1),
    }
    for field, request in cases.items():
        with pytest.raises(aio.AioRpcError) as error:
            await host.stub.AfterTurn(request)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (error.value.details() or "").startswith(field), (field, error.value.details())
    longer = [*transcript, user("a third question about the rollout plan")]
    response = await host.stub.AfterTurn(after_turn(identity, longer, len(transcript)))
    assert response.persisted_count == 1
    assert [s for s, _ in await stored_turns(host.openviking, identity)] == list(range(len(longer)))


async def test_capture_off_and_heartbeat_are_no_ops(capture_stack: CaptureStack) -> None:
    off = await capture_stack.start(autoCapture=False)
    identity = new_identity()
    response = await off.stub.AfterTurn(after_turn(identity, conversation(1), 0))
    assert response.skipped_reason == "auto_capture_disabled" and response.persisted_count == 0
    on = await capture_stack.start()
    beat = await on.stub.AfterTurn(after_turn(identity, conversation(1), 0, is_heartbeat=True))
    assert beat.skipped_reason == "heartbeat"
    assert await stored_turns(on.openviking, identity) == []


async def test_turn_count_trigger_fires_once_at_its_threshold(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start(compactTurnThreshold=3)
    identity = new_identity()
    transcript = conversation(3)
    first_session = session_id_for(parsed(identity).stream_id, 0)
    responses = await play(host, identity, transcript, user_boundaries(transcript))
    fired = [r.trigger_fired for r in responses]
    assert fired == [0, 0, checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT]
    assert [bool(r.compaction_checkpoint_id) for r in responses] == [False, False, True]
    checkpoint_id = responses[-1].compaction_checkpoint_id
    # The real CompactionService committed the session in the background: a checkpoint for this
    # stream, made for the turn-count trigger, and the stream's new turns go to the next generation.
    cp = await settled_checkpoint(host, identity, checkpoint_id)
    assert cp.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED
    assert cp.trigger == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
    assert cp.host_session_id == identity.session_id and cp.agent_id == "helper"
    assert cp.session_id == first_session and cp.archive_uri
    assert (cp.source_turn_range.start_sequence, cp.source_turn_range.end_sequence) == (
        0,
        len(transcript) - 1,
    )
    listed = await host.compaction.ListCheckpoints(
        compaction_pb2.ListCheckpointsRequest(identity=identity), timeout=60
    )
    assert [c.checkpoint_id for c in listed.checkpoints] == [checkpoint_id]  # fired once
    state = await stream_state(host.openviking, identity)
    assert state.generation == 1 and state.active_session == session_id_for(state.stream_id, 1)
    assert state.sessions == [first_session, state.active_session]
    assert state.checkpoint_ids == [checkpoint_id] and state.turns_since_compaction == 0


async def test_compaction_down_the_turn_returns_and_the_hand_off_waits_durably(
    capture_stack: CaptureStack,
) -> None:
    down = await capture_stack.start(compaction=False, compactTurnThreshold=1)  # compaction down
    identity = new_identity()
    response = await down.stub.AfterTurn(after_turn(identity, conversation(1), 0))
    assert response.persisted_count == 2
    assert response.trigger_fired == checkpoint_pb2.COMPACTION_TRIGGER_TURN_COUNT
    state = await stream_state(down.openviking, identity)
    assert [e.checkpoint_id for e in state.inflight] == [response.compaction_checkpoint_id]
    assert state.generation == 1 and state.turns_since_compaction == 0
    assert [s for s, _ in await stored_turns(down.openviking, identity)] == [0, 1]
    # A compaction replica that comes up later owns the recorded hand-off to the end.
    up = await capture_stack.start()
    cp = await settled_checkpoint(up, identity, response.compaction_checkpoint_id)
    assert cp.status == checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED and cp.archive_uri
    assert (cp.source_turn_range.start_sequence, cp.source_turn_range.end_sequence) == (0, 1)
    # the checkpoint is finalised first, then its in-flight entry is forgotten
    for _ in range(100):
        if not (await stream_state(up.openviking, identity)).inflight:
            break
        await asyncio.sleep(0.1)
    assert not (await stream_state(up.openviking, identity)).inflight


async def test_openviking_unavailable_then_retry_loses_and_doubles_nothing(
    capture_stack: CaptureStack,
) -> None:
    real = await capture_stack.start()
    down = await capture_stack.start(base_url="http://127.0.0.1:9")
    identity = new_identity()
    transcript = conversation(3)
    await real.stub.AfterTurn(after_turn(identity, transcript[:2], 0))
    with pytest.raises(aio.AioRpcError) as error:
        await down.stub.AfterTurn(after_turn(identity, transcript, 2))
    assert error.value.code() == grpc.StatusCode.UNAVAILABLE
    response = await real.stub.AfterTurn(after_turn(identity, transcript, 2))
    assert response.persisted_count == len(transcript) - 2
    assert [s for s, _ in await stored_turns(real.openviking, identity)] == list(range(len(transcript)))


async def test_ingest_is_idempotent_by_host_message_id(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    messages = [user(f"imported message number {i}", mid=f"m{i}") for i in range(3)]
    first = await host.stub.Ingest(capture_pb2.IngestRequest(identity=identity, messages=messages))
    assert (first.ingested_count, first.duplicate_count) == (3, 0)
    retry = await host.stub.Ingest(capture_pb2.IngestRequest(identity=identity, messages=messages))
    assert (retry.ingested_count, retry.duplicate_count) == (0, 3)
    more = [*messages[1:], user("a new one", mid="m9")]
    third = await host.stub.Ingest(capture_pb2.IngestRequest(identity=identity, messages=more))
    assert (third.ingested_count, third.duplicate_count) == (1, 2)
    stored = await stored_turns(host.openviking, identity)
    assert [(s, m.id) for s, m in stored] == [(0, "m0"), (1, "m1"), (2, "m2"), (3, "m9")]


async def test_store_memory_is_findable_at_once_and_idempotent(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    text = "The user's favourite database is PostgreSQL with the pgvector extension"
    stored = await host.stub.StoreMemory(capture_pb2.StoreMemoryRequest(identity=identity, text=text))
    assert stored.created and stored.uri.startswith(f"viking://user/{identity.user_id}/memories/notes/")
    again = await host.stub.StoreMemory(capture_pb2.StoreMemoryRequest(identity=identity, text=text))
    assert (again.uri, again.created) == (stored.uri, False)
    parsed = parse_identity(identity, default_agent_id="x", session_required=False)
    found = await host.openviking.find(
        parsed.tenant, "favourite database", target_uri="viking://~/memories", level=2
    )
    hit = next(h for h in found.memories if h.uri == stored.uri)
    assert "source=memory_store" in hit.tags and "ce_scope=user" in hit.tags
    agent = await host.stub.StoreMemory(
        capture_pb2.StoreMemoryRequest(identity=identity, text=text, scope=packet_pb2.MEMORY_SCOPE_AGENT)
    )
    assert f"/memories/notes/agent-{agent_key('helper')}/" in agent.uri


async def test_forget_memory_tenant_isolation_and_query(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    alice, bob = new_identity(), new_identity()
    text = "Alice keeps her bicycle in the blue garage on Elm Street"
    stored = await host.stub.StoreMemory(capture_pb2.StoreMemoryRequest(identity=alice, text=text))
    with pytest.raises(aio.AioRpcError) as error:
        await host.stub.ForgetMemory(capture_pb2.ForgetMemoryRequest(identity=bob, uri=stored.uri))
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(aio.AioRpcError) as error:
        await host.stub.ForgetMemory(
            capture_pb2.ForgetMemoryRequest(identity=bob, uri="viking://resources/x.md")
        )
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    parsed = parse_identity(alice, default_agent_id="x", session_required=False)
    assert await host.openviking.stat(parsed.tenant, stored.uri)  # bob's attempt harmed nothing
    forgot = await host.stub.ForgetMemory(capture_pb2.ForgetMemoryRequest(identity=alice, query=text))
    assert list(forgot.deleted_uris) == [stored.uri], forgot
    found = await host.openviking.find(parsed.tenant, text, target_uri="viking://~/memories", level=2)
    assert stored.uri not in [h.uri for h in found.memories]
    gone = await host.stub.ForgetMemory(
        capture_pb2.ForgetMemoryRequest(identity=alice, query="bicycle garage")
    )
    assert not gone.deleted_uris


async def test_flush_sessions_and_shutdown_flush(
    capture_stack: CaptureStack, openviking: OpenVikingEndpoint
) -> None:
    host = await capture_stack.start()
    user_id = f"flushuser-{uuid.uuid4().hex[:6]}"
    one, two = new_identity(user=user_id, session="fs-1"), new_identity(user=user_id, session="fs-2")
    for identity in (one, two):
        await host.stub.AfterTurn(after_turn(identity, conversation(1), 0))
    flushed = await host.stub.FlushSessions(capture_pb2.FlushSessionsRequest(identity=one))
    [cp] = flushed.checkpoints
    assert cp.host_session_id == "fs-1" and cp.trigger == checkpoint_pb2.COMPACTION_TRIGGER_FLUSH
    assert (await stream_state(host.openviking, one)).checkpoint_ids == [cp.checkpoint_id]
    assert (await stream_state(host.openviking, two)).checkpoint_ids == []  # only the asked-for one
    # A new turn on fs-1 (now in generation 1): both streams have uncommitted turns again.
    longer = [*conversation(1), *conversation(1, prefix="later")]
    await host.stub.AfterTurn(after_turn(one, longer, 2))
    await host.host.stop()  # what SIGTERM does: drain, then the shutdown hook flushes
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        states = {i.session_id: await stream_state(ov, i) for i in (one, two)}
        assert [len(s.checkpoint_ids) for s in states.values()] == [2, 1]
        assert [s.generation for s in states.values()] == [2, 1]
        assert all(s.turns_since_compaction == 0 for s in states.values())
        for identity, state in zip((one, two), states.values(), strict=True):
            record = await checkpoint(ov, identity, state.checkpoint_ids[-1])
            assert record.trigger == checkpoint_pb2.COMPACTION_TRIGGER_FLUSH
            assert record.host_session_id == identity.session_id


async def test_stream_state_counts_the_turns(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    transcript = conversation(3)
    await play(host, identity, transcript, user_boundaries(transcript))
    state = await stream_state(host.openviking, identity)
    assert (state.turns_since_compaction, state.last_sequence, state.pending_write) == (
        3,
        len(transcript) - 1,
        None,
    )
    assert state.tokens_since_compaction == state.active_tokens > 0
