"""What a chaos run must leave in OpenViking, read from OpenViking itself (and ExpandMemory)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextengine.v1 import checkpoint_pb2, compaction_pb2, compaction_pb2_grpc

from services.compaction.transcript import session_turns
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.envelope import turn_id_for
from shared.domain.identity import RequestIdentity, parse_identity
from shared.domain.stream_state import StreamState, StreamStateStore, utc_now
from shared.domain.turn_index import IndexedMessage, session_index_uri, turn_documents
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from tests.chaos.host import HostSession
from tests.support.stored import stored_turns

Status = checkpoint_pb2.CheckpointStatus


@dataclass
class Verdict:
    turns: int = 0
    checkpoints: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    uncommitted: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unexpandable: list[str] = field(default_factory=list)
    unindexed: list[str] = field(default_factory=list)
    """Stored exchanges with no turn-index document (never findable by recall)."""

    @property
    def problems(self) -> dict[str, list[str]]:
        names = (
            "lost",
            "duplicated",
            "out_of_order",
            "uncommitted",
            "pending",
            "failed",
            "unexpandable",
            "unindexed",
        )
        return {name: getattr(self, name) for name in names if getattr(self, name)}


def stream_identity(session: HostSession) -> RequestIdentity:
    return parse_identity(session.identity, default_agent_id="main", session_required=True)


async def _state(states: StreamStateStore, session: HostSession) -> StreamState:
    state = await states.load(stream_identity(session))
    assert state is not None, session.identity.session_id
    return state


async def settle(openviking: OpenVikingClient, sessions: Sequence[HostSession], within: float) -> float:
    """Wait until no stream has a compaction in flight and every checkpoint is terminal;
    the seconds it took (the caller asserts the bound)."""
    documents = DocumentStore(openviking)
    states, store = StreamStateStore(documents), CheckpointStore(documents)
    started = time.monotonic()
    while time.monotonic() - started < within:
        settled = True
        for session in sessions:
            state = await _state(states, session)
            records = [await store.read(stream_identity(session).tenant, c) for c in state.checkpoint_ids]
            if state.inflight or any(r is None or not r.is_terminal for r in records):
                settled = False
                break
        if settled:
            break
        await asyncio.sleep(1.0)
    return time.monotonic() - started


async def _verify_turns(
    openviking: OpenVikingClient, session: HostSession, state: StreamState, verdict: Verdict
) -> None:
    name = session.identity.session_id
    identity = stream_identity(session)
    stored = await stored_turns(openviking, identity.tenant, state.sessions)
    sequences = [t.sequence for t in stored]
    expected = {i: turn_id_for(identity.stream_id, i, m) for i, m in enumerate(session.transcript)}
    verdict.turns += len(expected)
    by_id = {t.turn_id for t in stored}
    verdict.lost += [f"{name}#{i}" for i, turn_id in expected.items() if turn_id not in by_id]
    verdict.duplicated += [f"{name}#{s}x{n}" for s, n in Counter(sequences).items() if n > 1]
    verdict.out_of_order += [f"{name}#{b}<{a}" for a, b in itertools.pairwise(sequences) if b < a]
    live = [t.sequence for t in stored if not t.archived]
    if live or state.turns_since_compaction or state.inflight:
        verdict.uncommitted.append(
            f"{name}: live {live}, inflight {[e.checkpoint_id for e in state.inflight]}"
        )


async def _verify_index(
    openviking: OpenVikingClient, session: HostSession, state: StreamState, verdict: Verdict
) -> None:
    """Every exchange stored in any of the stream's sessions has its index document (documents
    have one URI per exchange: there is no second one to find)."""
    tenant = stream_identity(session).tenant
    for session_id in state.sessions:
        turns = await session_turns(openviking, tenant, session_id)
        messages = [IndexedMessage(t.sequence, t.message) for t in turns]
        wanted = {d.uri.rsplit("/", 1)[-1] for d in turn_documents(session_id, messages, utc_now())}
        try:
            listing = await openviking.ls(tenant, session_index_uri(session_id), node_limit=1_000_000)
            present = {entry.uri.rsplit("/", 1)[-1] for entry in listing.entries}
        except BackendNotFound:
            present = set()
        verdict.unindexed += [f"{session_id}/{name}" for name in sorted(wanted - present)]


async def _verify_checkpoints(
    openviking: OpenVikingClient,
    compaction: compaction_pb2_grpc.CompactionServiceStub,
    session: HostSession,
    state: StreamState,
    verdict: Verdict,
) -> None:
    store = CheckpointStore(DocumentStore(openviking))
    tenant = stream_identity(session).tenant
    for checkpoint_id in state.checkpoint_ids:
        verdict.checkpoints += 1
        record = await store.read(tenant, checkpoint_id)
        if record is None or not record.is_terminal:
            verdict.pending.append(checkpoint_id)
            continue
        if record.status == Status.CHECKPOINT_STATUS_FAILED:
            verdict.failed.append(f"{checkpoint_id}: {record.failure_reason}")
            continue
        expanded = await compaction.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(
                identity=session.identity, summary_or_memory_uri=checkpoint_id, limit=100
            ),
            timeout=60,
        )
        reached = sorted(t.turn.sequence for t in expanded.turns)
        wanted = list(range(record.start_sequence, record.end_sequence + 1))
        if not record.archive_uri or reached != wanted:
            verdict.unexpandable.append(f"{checkpoint_id}: {reached} != {wanted}")


async def verify(
    openviking: OpenVikingClient,
    compaction: compaction_pb2_grpc.CompactionServiceStub,
    sessions: Sequence[HostSession],
) -> Verdict:
    verdict = Verdict()
    states = StreamStateStore(DocumentStore(openviking))
    for session in sessions:
        state = await _state(states, session)
        await _verify_turns(openviking, session, state, verdict)
        await _verify_index(openviking, session, state, verdict)
        await _verify_checkpoints(openviking, compaction, session, state, verdict)
    return verdict
