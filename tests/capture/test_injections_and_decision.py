"""Pure capture logic: injected content recognition, the capture decision, memory URI rules."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from contextengine.v1 import common_pb2, packet_pb2

from services.assembly import injection as assembly_injection
from services.capture import injections
from services.capture.decision import capture_decision
from services.capture.memories import (
    checked_forget_uri,
    memory_tags,
    memory_uri,
    unambiguous_match,
)
from shared.domain import engine_injections
from shared.domain.identity import RequestIdentity
from shared.domain.memory_scope import agent_key
from shared.domain.turn_index import said_from_tags
from shared.errors import InvalidArgument, PermissionDenied
from shared.openviking.models.search import SearchHit
from shared.openviking.tenant import Tenant
from tests.capture.messages import assistant, injected_recall, tool_call, tool_result, user

ALICE = RequestIdentity(Tenant("acme", "alice"), "Main-Bot", "sess:1@x", "")


def test_markers_match_what_assembly_injects() -> None:
    assert engine_injections.INJECTED_ID_PREFIX == assembly_injection.INJECTED_ID_PREFIX
    assert engine_injections.INJECTED_MARKER_KEY == assembly_injection.INJECTED_MARKER_KEY
    assert engine_injections.AUTO_RECALL_TOOL == assembly_injection.AUTO_RECALL_TOOL
    assert engine_injections.SUMMARY_HEADER == assembly_injection.SUMMARY_HEADER
    call, result = assembly_injection.injected_recall_pair("q", [], "abcdefghi")
    summary = assembly_injection.summary_message(["earlier we agreed on X"])
    cleaned = injections.clean_transcript([user("hello there friend"), call, result, summary])
    assert [c.injected for c in cleaned] == [False, True, True, True]


def test_recall_pair_without_markers_is_still_recognised_by_tool_name_and_call_id() -> None:
    call, result = injected_recall("c1")
    for m in (call, result):
        m.id = ""
        m.ClearField("host_fields")
    result.content[0].tool_result.tool_name = ""  # only the call id links it
    cleaned = injections.clean_transcript([user("hi there, how are you"), call, result])
    assert [c.injected for c in cleaned] == [False, True, True]


def test_injections_a_host_hands_back_without_marks_or_with_renamed_ids_are_not_captured() -> None:
    """OpenClaw keeps no message id, may drop host_fields and renames a seen call id `abc2`."""
    call, result = assembly_injection.injected_recall_pair("q", [], "abcdefghi")
    summary = assembly_injection.summary_message(["earlier we agreed on X"])
    for m in (call, result, summary):
        m.id = ""
        m.ClearField("host_fields")
    call.content[0].tool_call.id = result.content[0].tool_result.tool_call_id = "abcdefghi2"
    cleaned = injections.clean_transcript(
        [summary, user("hello there friend"), call, result, assistant("ok")]
    )
    assert [c.injected for c in cleaned] == [True, False, True, True, False]


def test_mixed_assistant_message_keeps_its_own_blocks() -> None:
    mixed = tool_call("real1", "shell", '{"cmd":"ls"}')
    mixed.content.append(
        common_pb2.ContentBlock(
            tool_call=common_pb2.ToolCallBlock(
                id="auto1", name="memory_recall_auto", arguments=common_pb2.JsonValue(json="{}")
            )
        )
    )
    cleaned = injections.clean_transcript([mixed])[0]
    assert not cleaned.injected and cleaned.message is not None
    assert cleaned.skipped == 1
    assert [b.WhichOneof("block") for b in cleaned.message.content] == ["text", "tool_call"]
    assert cleaned.message.content[1].tool_call.id == "real1"


def test_relevant_memories_blocks_are_stripped_from_text() -> None:
    m = user("<relevant-memories>\n- [prefs] dark theme\n</relevant-memories>\nWhat did we decide on Kafka?")
    cleaned = injections.clean_transcript([m])[0]
    assert cleaned.message is not None
    assert cleaned.message.content[0].text.text == "What did we decide on Kafka?"
    assert cleaned.skipped == 1, "a stripped block is counted as an injection not captured"
    only = injections.clean_transcript([user("<relevant-memories>x</relevant-memories>")])[0]
    assert only.injected and only.message is None and only.skipped == 1
    two = user("<relevant-memories>a</relevant-memories>q<RELEVANT-MEMORIES>b</relevant-memories>")
    assert injections.clean_transcript([two])[0].skipped == 2


def test_plain_messages_pass_through_unchanged() -> None:
    messages = [
        user("hello"),
        assistant("hi"),
        tool_call("c", "shell", "{}"),
        tool_result("c", "shell", "ok"),
    ]
    for original, cleaned in zip(messages, injections.clean_transcript(messages), strict=True):
        assert cleaned.message is original


@pytest.mark.parametrize(
    ("text", "worthy", "reason"),
    [
        ("I prefer dark theme in every editor I use", True, "semantic_candidate"),
        ("ok", False, "length_out_of_range"),
        ("/reset the whole session now", False, "command_text"),
        ("?!?!?!?!?!?!?!", False, "non_content_text"),
        ("[Subagent Context] you are a helper agent", False, "subagent_context"),
        ("what time is it in Tokyo right now?", False, "question_text"),
        ("please remember: what I said about Kafka?", True, "semantic_candidate"),
        ("<relevant-memories>stuff</relevant-memories>", False, "injected_memory_context_only"),
        ("[Mon 2026-01-05 10:00] I always deploy on Tuesdays", True, "semantic_candidate"),
        ("我喜欢深色主题", True, "semantic_candidate"),
    ],
)
def test_capture_decision(text: str, worthy: bool, reason: str) -> None:
    decision = capture_decision(text, 24_000)
    assert (decision.worthy, decision.reason) == (worthy, reason)


def test_capture_decision_rejects_too_long() -> None:
    assert capture_decision("x" * 101, 100).reason == "length_out_of_range"


def test_memory_uri_is_stable_scoped_and_filed_under_its_category() -> None:
    a = memory_uri(ALICE, "I prefer dark theme", "notes", packet_pb2.MEMORY_SCOPE_USER)
    assert a.startswith("viking://~/memories/notes/i-prefer-dark-theme-") and a.endswith(".md")
    prefs = memory_uri(ALICE, "I prefer dark theme", "preferences", packet_pb2.MEMORY_SCOPE_USER)
    assert prefs.startswith("viking://~/memories/preferences/i-prefer-dark-theme-")
    agent = memory_uri(ALICE, "I prefer dark theme", "notes", packet_pb2.MEMORY_SCOPE_AGENT)
    assert agent.startswith(f"viking://~/memories/notes/agent-{agent_key('Main-Bot')}/")
    other = RequestIdentity(ALICE.tenant, "main-bot", "", "")
    assert memory_uri(other, "I prefer dark theme", "notes", packet_pb2.MEMORY_SCOPE_AGENT) != agent
    assert memory_uri(ALICE, "!!!", "notes", packet_pb2.MEMORY_SCOPE_USER).startswith(
        "viking://~/memories/notes/memory-"
    )


def test_memory_tags_are_lower_case_and_safe() -> None:
    said = datetime(2026, 3, 4, 14, 5, tzinfo=UTC)
    assert memory_tags(ALICE, "notes", packet_pb2.MEMORY_SCOPE_USER, said) == [
        "source=memory_store",
        "category=notes",
        "ce_scope=user",
        "said=202603041405",
        "session=sess_1_x",
    ]
    assert (
        said_from_tags(memory_tags(ALICE, "notes", packet_pb2.MEMORY_SCOPE_USER, said)) == "2026-03-04 14:05"
    )
    agent_tags = memory_tags(ALICE, "notes", packet_pb2.MEMORY_SCOPE_AGENT, said)
    assert agent_tags[2:4] == ["ce_scope=agent", f"ce_agent={agent_key('Main-Bot')}"]
    assert all(tag == tag.lower() for tag in agent_tags)


@pytest.mark.parametrize(
    "uri",
    [
        "viking://~/memories/notes/a.md",
        "viking://user/alice/memories/preferences/x.md",
    ],
)
def test_own_memory_uris_may_be_forgotten(uri: str) -> None:
    assert checked_forget_uri(ALICE, uri) == uri


@pytest.mark.parametrize("uri", ["viking://user/bob/memories/notes/a.md", "viking://user/bob/sessions/s1"])
def test_other_users_uris_are_permission_denied(uri: str) -> None:
    with pytest.raises(PermissionDenied):
        checked_forget_uri(ALICE, uri)


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "https://x/y",
        "viking://resources/doc.md",
        "viking://agent/skills/x",
        "viking://~/memories/../resources/x",
        "viking://~/memories/",
        "viking://~/memories/notes/",
    ],
)
def test_non_memory_uris_are_invalid(uri: str) -> None:
    with pytest.raises((InvalidArgument, PermissionDenied)):
        checked_forget_uri(ALICE, uri)


def test_unambiguous_match_rules() -> None:
    def hit(score: float) -> SearchHit:
        return SearchHit(uri=f"viking://user/alice/memories/notes/{score}.md", score=score)

    assert unambiguous_match([]) is None
    assert unambiguous_match([hit(0.74)]) is None
    assert unambiguous_match([hit(0.75)]) is not None
    assert unambiguous_match([hit(0.9), hit(0.81)]) is None
    top = unambiguous_match([hit(0.7), hit(0.9)])
    assert top is not None and top.score == 0.9
