"""What goes in comes back: generated host transcripts round-trip byte for byte through
AfterTurn -> Compact -> ExpandMemory (paged), against the real OpenViking."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from contextengine.v1 import capture_pb2, checkpoint_pb2, common_pb2, compaction_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from services.assembly.injection import is_engine_injected
from shared.domain.json_text import MAX_DEPTH, check_json_text, openviking_view
from shared.errors import InvalidArgument
from tests.contract.conftest import ENGINE_SETTINGS
from tests.contract.host_messages import json_texts, transcripts
from tests.e2e.host import Stubs

pytestmark = pytest.mark.stack

ACCOUNT = f"ce-rt-{uuid.uuid4().hex[:8]}"
EXAMPLES = 42
EXAMPLE_SIZE = (12, 16)
"""42 generated transcripts of 12-16 messages: at least 504 messages per run..."""
SESSIONS = 8
"""...replayed through 8 host sessions."""
PAGE = 17
"""ExpandMemory page size (below memoryExpandMaxResults, so several pages per session)."""


def wire(messages: list[common_pb2.ConversationMessage]) -> list[bytes]:
    return [m.SerializeToString(deterministic=True) for m in messages]


async def round_trip(stubs: Stubs, sent: list[common_pb2.ConversationMessage]) -> None:
    identity = common_pb2.Identity(
        account_id=ACCOUNT, user_id="rt", agent_id="main", session_id=f"rt-{uuid.uuid4().hex[:10]}"
    )
    after = await stubs.capture.AfterTurn(
        capture_pb2.AfterTurnRequest(identity=identity, messages=sent, pre_prompt_message_count=0),
        timeout=300,
    )
    assert (after.persisted_count, after.injected_skipped_count) == (len(sent), 0)

    compacted = await stubs.compaction.Compact(
        compaction_pb2.CompactRequest(
            identity=identity, force=True, trigger=checkpoint_pb2.COMPACTION_TRIGGER_HOST_REQUEST
        ),
        timeout=300,
    )
    assert compacted.compacted, compacted.reason
    recent = int(str(ENGINE_SETTINGS["recentRawTurnCount"]))
    # The new working context: the compact summary the engine injected, then the raw turns.
    injected = [m for m in compacted.messages if is_engine_injected(m)]
    raw = [m for m in compacted.messages if not is_engine_injected(m)]
    assert len(injected) <= 1 and list(compacted.messages[: len(injected)]) == injected
    assert wire(raw) == wire(sent[-recent:]), "Compact's raw turns are the exact originals"

    expanded: list[compaction_pb2.ExpandedTurn] = []
    token = ""
    while True:
        page = await stubs.compaction.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(
                identity=identity,
                summary_or_memory_uri=compacted.checkpoint.checkpoint_id,
                limit=PAGE,
                page_token=token,
            ),
            timeout=120,
        )
        assert len(page.turns) <= PAGE
        expanded += page.turns
        token = page.next_page_token
        if not token:
            break
    assert [t.turn.sequence for t in expanded] == list(range(len(sent)))
    got = [t.message for t in expanded]
    for i, (original, back) in enumerate(zip(sent, got, strict=True)):
        assert back.SerializeToString(deterministic=True) == original.SerializeToString(deterministic=True), (
            f"message {i} changed:\n{original}\n---\n{back}"
        )


async def test_generated_transcripts_round_trip_byte_for_byte(contract_engine: Stubs) -> None:
    """Hypothesis generates the transcripts (small examples: a 50-message example overruns its
    data budget); they are replayed in a few sessions so the run stays CI-sized."""
    generated: list[list[common_pb2.ConversationMessage]] = []

    @settings(max_examples=EXAMPLES, deadline=None, database=None)
    @given(transcripts(min_size=EXAMPLE_SIZE[0], max_size=EXAMPLE_SIZE[1]))
    def collect(transcript: list[common_pb2.ConversationMessage]) -> None:
        generated.append(transcript)

    collect()
    assert sum(len(t) for t in generated) >= EXAMPLES * EXAMPLE_SIZE[0] >= 500
    per_session = -(-len(generated) // SESSIONS)
    for start in range(0, len(generated), per_session):
        await round_trip(contract_engine, [m for t in generated[start : start + per_session] for m in t])


# --- the JSON policy, as properties of the edge validator -------------------------------------


@settings(max_examples=300, deadline=None)
@given(json_texts())
def test_rfc_8259_json_is_accepted_and_its_openviking_view_is_plain_json(text: str) -> None:
    check_json_text(text, "f")
    json.dumps(openviking_view(text), allow_nan=False).encode("utf-8")  # OpenViking can take it


NOT_JSON = ("NaN", "Infinity", "-Infinity")


@settings(max_examples=200, deadline=None)
@given(json_texts(object_only=True), st.sampled_from(NOT_JSON))
def test_nan_and_infinity_are_refused_naming_the_field(text: str, constant: str) -> None:
    poisoned = text.rstrip()[:-1].rstrip()
    poisoned += ("," if not poisoned.endswith("{") else "") + f'"x":{constant}}}'
    with pytest.raises(InvalidArgument) as caught:
        check_json_text(poisoned, "messages[0].host_fields.json")
    assert caught.value.field == "messages[0].host_fields.json"


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_too_deep_json_is_refused_not_crashed(depth: int) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_json_text("[" * depth + "]" * depth, "f")
    assert "deeper than" in caught.value.problem
    check_json_text("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f")


async def test_a_nan_message_is_refused_and_nothing_is_written(contract_engine: Stubs) -> None:
    identity = common_pb2.Identity(account_id=ACCOUNT, user_id="nan", agent_id="main", session_id="nan-1")
    call = common_pb2.ToolCallBlock(id="c1", name="calc", arguments=common_pb2.JsonValue(json='{"x": NaN}'))
    message = common_pb2.ConversationMessage(
        role=common_pb2.MESSAGE_ROLE_ASSISTANT, content=[common_pb2.ContentBlock(tool_call=call)]
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await contract_engine.capture.AfterTurn(
            capture_pb2.AfterTurnRequest(identity=identity, messages=[message]), timeout=60
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith("messages[0].content[0].tool_call.arguments.json:")
    fine = common_pb2.ConversationMessage(
        role=common_pb2.MESSAGE_ROLE_USER,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text="hi"))],
    )
    after = await contract_engine.capture.AfterTurn(
        capture_pb2.AfterTurnRequest(identity=identity, messages=[fine]), timeout=60
    )
    assert (after.persisted_count, after.last_sequence) == (1, 0), "the refused call wrote nothing"
