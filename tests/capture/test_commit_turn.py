"""CommitTurn: one fenced turn stored whole, exactly once per advancement key, on real OpenViking.

Two capture hosts are two replicas (separate servicers, separate state caches) over the same
OpenViking; a replay, a concurrent duplicate delivery and a retry after a failed append must
each leave every message of the turn stored exactly once, with the host's anchors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import grpc
import pytest
from contextengine.v1 import capture_pb2, common_pb2
from grpc import aio

from services.capture.backlog import IndexBacklog
from services.capture.compaction_client import CompactionNudger
from services.capture.host_ids import READ_ALL_TOKEN_BUDGET
from services.capture.transcript import TranscriptWriter
from services.capture.triggers import TriggerThresholds
from services.capture.turns import FencedTurn, TurnCapture
from shared.config import Settings, load_settings
from shared.domain.documents import DocumentStore
from shared.domain.envelope import persisted_turn, provenance_of
from shared.domain.stream_state import StreamStateStore, session_id_for
from shared.errors import BackendUnavailable
from shared.localstack.processes import free_port
from shared.openviking._sessions_api import MAX_BATCH_MESSAGES
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.parts import NewMessage
from shared.openviking.tenant import Tenant
from shared.runtime.context import build_openviking_client
from tests.capture.conftest import CaptureStack, new_identity, parsed, stream_state
from tests.capture.messages import assistant, injected_recall, tool_call, tool_result, user
from tests.capture.test_partial_failures import FlakyAppend
from tests.support.settled import settled_stream_state
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

COMMITTED = capture_pb2.COMMIT_TURN_STATUS_COMMITTED
DUPLICATE = capture_pb2.COMMIT_TURN_STATUS_DUPLICATE


def turn_messages(n: int) -> list[common_pb2.ConversationMessage]:
    """A user prompt, a tool call and its result, the terminal assistant answer."""
    call = f"call{n}"
    return [
        user(f"turn {n}: we decided to deploy service {n} with blue-green", mid=f"lt-{n}:user"),
        tool_call(call, "shell", f'{{"cmd": "kubectl rollout status deploy/s{n}"}}'),
        tool_result(call, "shell", f"deployment s{n} successfully rolled out"),
        assistant(f"turn {n}: service {n} is deployed."),
    ]


def anchor(n: int, role: str) -> str:
    return json.dumps({"logicalTurnId": f"lt-{n}", "entryId": f"e{n}-{role}", "rawSeq": n * 10, "role": role})


def capture_replica(
    client: object, states: StreamStateStore, settings: Settings, index: IndexBacklog | None = None
) -> TurnCapture:
    """A capture replica's turn logic over `client` (compaction unreachable: no trigger fires here)."""
    dead = f"127.0.0.1:{free_port()}"
    return TurnCapture(
        states,
        TranscriptWriter(client, states),  # type: ignore[arg-type]
        CompactionNudger(lambda: dead),
        TriggerThresholds.from_settings(settings),
        default_encoding=settings.default_encoding,
        capture_max_length=settings.capture_max_length,
        index=index,
    )


def commit(identity: common_pb2.Identity, n: int, *, key: str = "") -> capture_pb2.CommitTurnRequest:
    return capture_pb2.CommitTurnRequest(
        identity=identity,
        messages=turn_messages(n),
        advancement_key=key or f"lt-{n}",
        admission=common_pb2.JsonValue(json=anchor(n, "user")),
        terminal=common_pb2.JsonValue(json=anchor(n, "assistant")),
    )


Stored = list[tuple[int, dict[str, object] | None]]


async def stored(ov: OpenVikingClient, identity: common_pb2.Identity) -> Stored:
    """(sequence, provenance) of every message in the stream's first session."""
    who = parsed(identity)
    await stream_state(ov, identity)  # settled: the turn's append follows its answer
    context = await ov.get_session_context(
        who.tenant, session_id_for(who.stream_id, 0), token_budget=READ_ALL_TOKEN_BUDGET
    )
    rows = []
    for message in context.messages:
        turn = persisted_turn(message)
        assert turn is not None
        rows.append((turn.sequence, provenance_of(message)))
    return rows


async def test_a_turn_is_stored_whole_with_its_anchors_and_a_replay_on_another_replica_is_duplicate(
    capture_stack: CaptureStack,
) -> None:
    first, second = await capture_stack.start(), await capture_stack.start(compaction=False)
    identity = new_identity()

    committed = await first.stub.CommitTurn(commit(identity, 1))
    assert committed.status == COMMITTED
    assert (committed.persisted_count, committed.first_sequence, committed.last_sequence) == (4, 0, 3)
    assert committed.capture_worthy
    before = await stream_state(first.openviking, identity)

    replay = await second.stub.CommitTurn(commit(identity, 1))
    assert replay.status == DUPLICATE
    assert (replay.persisted_count, replay.first_sequence, replay.last_sequence) == (0, 0, 3)
    after = await stream_state(first.openviking, identity)
    assert after.model_dump(exclude={"created_at"}) == before.model_dump(exclude={"created_at"})

    following = await second.stub.CommitTurn(commit(identity, 2))
    assert (following.status, following.first_sequence, following.last_sequence) == (COMMITTED, 4, 7)

    rows = await stored(first.openviking, identity)
    assert [s for s, _ in rows] == list(range(8))
    for sequence, provenance in rows:
        n = 1 if sequence < 4 else 2
        assert provenance == {
            "advancementKey": f"lt-{n}",
            "admission": json.loads(anchor(n, "user")),
            "terminal": json.loads(anchor(n, "assistant")),
        }


async def test_concurrent_duplicate_deliveries_across_replicas_store_the_turn_once(
    capture_stack: CaptureStack,
) -> None:
    replicas = [await capture_stack.start(), await capture_stack.start(compaction=False)]
    identity = new_identity()
    responses = await asyncio.gather(
        *(replicas[i % 2].stub.CommitTurn(commit(identity, 7)) for i in range(6))
    )
    assert sorted(r.status for r in responses) == [COMMITTED] + [DUPLICATE] * 5
    assert {(r.first_sequence, r.last_sequence) for r in responses} == {(0, 3)}
    assert sum(r.persisted_count for r in responses) == 4
    assert [s for s, _ in await stored(replicas[0].openviking, identity)] == [0, 1, 2, 3]


async def test_injected_recall_in_a_turn_is_never_stored(capture_stack: CaptureStack) -> None:
    host = await capture_stack.start()
    identity = new_identity()
    request = commit(identity, 3)
    messages = list(request.messages)
    del request.messages[:]
    request.messages.extend([*injected_recall("r1"), *messages])
    response = await host.stub.CommitTurn(request)
    assert (response.persisted_count, response.injected_skipped_count) == (4, 2)
    assert [s for s, _ in await stored(host.openviking, identity)] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("advancement_key", lambda r: setattr(r, "advancement_key", "")),
        ("advancement_key", lambda r: setattr(r, "advancement_key", "k" * 513)),
        ("admission", lambda r: r.admission.CopyFrom(common_pb2.JsonValue(json="[1]"))),
        ("terminal", lambda r: r.terminal.CopyFrom(common_pb2.JsonValue(json="{nope"))),
        ("messages[1].role", lambda r: setattr(r.messages[1], "role", 0)),
        ("token_budget", lambda r: setattr(r, "token_budget", -1)),
    ],
)
async def test_bad_input_names_the_field(capture_stack: CaptureStack, field: str, change: object) -> None:
    host = await capture_stack.start(compaction=False)
    request = commit(new_identity(), 1)
    change(request)  # type: ignore[operator]
    with pytest.raises(aio.AioRpcError) as failure:
        await host.stub.CommitTurn(request)
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (failure.value.details() or "").startswith(field)


@pytest.mark.parametrize("after", [False, True], ids=["fails-before-append", "fails-after-append"])
async def test_a_retry_after_a_failed_append_stores_the_turn_exactly_once(
    openviking: OpenVikingEndpoint, after: bool
) -> None:
    """The first replica's append fails after the turn was answered COMMITTED (its claim holds
    the turn's outbox); the host's retry on another replica (its answer was lost, say) completes
    the claim and answers DUPLICATE with the turn's positions: the turn is stored whole, once."""
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        states = StreamStateStore(DocumentStore(ov))

        def replica(client: object) -> TurnCapture:
            return capture_replica(client, states, settings)

        identity = new_identity()
        who = parsed(identity)
        turn = FencedTurn(turn_messages(5), "lt-5", anchor(5, "user"), anchor(5, "assistant"))
        first = await replica(FlakyAppend(ov, after=after)).commit_turn(who, turn, token_budget=0, model="")
        assert not first.duplicate_turn and first.persisted_count == 4
        assert (first.first_sequence, first.last_sequence) == (0, 3)
        retry = await replica(ov).commit_turn(who, turn, token_budget=0, model="")
        assert retry.duplicate_turn and retry.persisted_count == 0
        assert (retry.first_sequence, retry.last_sequence) == (0, 3)
        assert [s for s, _ in await stored(ov, identity)] == [0, 1, 2, 3]
        state = await settled_stream_state(states, who)
        assert state.turns_since_compaction == 1
        assert [(t.first_sequence, t.last_sequence) for t in state.committed_turns] == [(0, 3)]


async def test_a_bootstrap_import_stores_the_history_once_and_never_after_turns(
    capture_stack: CaptureStack,
) -> None:
    replicas = [await capture_stack.start(), await capture_stack.start(compaction=False)]
    identity = new_identity()
    history = [*turn_messages(1), *turn_messages(2)]

    def bootstrap() -> capture_pb2.IngestRequest:
        return capture_pb2.IngestRequest(identity=identity, messages=history, only_if_new=True)

    imports = await asyncio.gather(*(replicas[i % 2].stub.Ingest(bootstrap()) for i in range(4)))
    assert sorted(r.ingested_count for r in imports) == [0, 0, 0, 8]
    await replicas[0].stub.CommitTurn(commit(identity, 3))
    late = await replicas[1].stub.Ingest(bootstrap())
    assert late.ingested_count == 0
    assert [s for s, _ in await stored(replicas[0].openviking, identity)][8:] == [8, 9, 10, 11]


class CutShortAppend:
    """Wraps the real client; the next `add_messages` stores only its first append, then fails."""

    def __init__(self, real: OpenVikingClient) -> None:
        self._real = real

    def __getattr__(self, name: str) -> object:
        return getattr(self._real, name)

    async def add_messages(
        self, tenant: Tenant, session_id: str, messages: Sequence[NewMessage], **kw: Any
    ) -> None:
        await self._real.add_messages(tenant, session_id, messages[:MAX_BATCH_MESSAGES], **kw)
        raise BackendUnavailable("replica died between two appends")


async def test_a_turn_longer_than_one_append_cut_short_is_completed_by_its_retry(
    openviking: OpenVikingEndpoint,
) -> None:
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        states = StreamStateStore(DocumentStore(ov))

        def replica(client: object) -> TurnCapture:
            return capture_replica(client, states, settings)

        identity = new_identity()
        who = parsed(identity)
        calls = [m for n in range(45) for m in turn_messages(n)[1:3]]  # 90
        # a prompt, 55 tool calls with their results, the answer: 112 messages, two appends
        long_turn = FencedTurn([turn_messages(0)[0], *calls, *calls[:20], turn_messages(0)[3]], "lt-long")
        with pytest.raises(BackendUnavailable):
            await replica(CutShortAppend(ov)).commit_turn(who, long_turn, token_budget=0, model="")
        retry = await replica(ov).commit_turn(who, long_turn, token_budget=0, model="")
        assert (retry.duplicate_turn, retry.persisted_count) == (False, 12)
        assert (retry.first_sequence, retry.last_sequence) == (0, 111)
        again = await replica(ov).commit_turn(who, long_turn, token_budget=0, model="")
        assert again.duplicate_turn and (again.first_sequence, again.last_sequence) == (0, 111)
        assert [s for s, _ in await stored(ov, identity)] == list(range(112))
        state = await states.load(who)
        assert state is not None and state.partial_turn is None and state.pending_write is None
