"""The stand-in LLM's parsing and replies, on prompts shaped like OpenViking 0.5.2's (observed)."""

from __future__ import annotations

import ast

import httpx

from tests.support.standin_llm import (
    ConversationLine,
    StandinLlm,
    classify,
    extraction_reply,
    parse_extraction_conversation,
    parse_previous_key_facts,
    parse_working_memory_conversation,
    reply_for,
    working_memory_reply,
)

SUMMARY_PROMPT = """You are a session note-taker.

Previous Working Memory (carry forward still-valid information):
<previous_working_memory>
# Working Memory

## Key Facts & Decisions
- The deadline is Friday.

## Open Issues
- None.
</previous_working_memory>

Conversation content:
<session_content>
[user]: Hi, I prefer dark theme.
It also applies to the terminal.
[assistant]: Noted.
[user]: We decided to keep config in conf/app.toml. Is that ok?
</session_content>

Output a complete Working Memory using the 7-section structure below.
"""

EXTRACTION_HISTORY = """## Conversation History
**Session Time:** 2026-11-30 09:16 (Monday)

[0][user][user]: I prefer tabs over spaces.
Always.
[1][user][bob]: Bob here, I decided to move to Paris.
[2][assistant][assistant]: ok
[3][user][user]: Please remember my cat is called Tom.

After exploring, analyze the conversation and output ALL memory write/edit/delete operations.
"""


def test_classifies_the_two_phase2_prompts() -> None:
    assert classify([{"role": "user", "content": SUMMARY_PROMPT}]) == "working_memory"
    extraction = [
        {"role": "system", "content": "memory SDK"},
        {"role": "user", "content": EXTRACTION_HISTORY},
    ]
    assert classify(extraction) == "extraction"
    assert classify([{"role": "user", "content": "plan queries"}]) == "other"


def test_parses_summary_conversation_with_continuation_lines() -> None:
    lines = parse_working_memory_conversation(SUMMARY_PROMPT)
    assert [line.role for line in lines] == ["user", "assistant", "user"]
    assert lines[0].text == "Hi, I prefer dark theme.\nIt also applies to the terminal."
    assert parse_previous_key_facts(SUMMARY_PROMPT) == ["The deadline is Friday."]


def test_working_memory_has_the_seven_sections_and_key_facts() -> None:
    reply = reply_for([{"role": "user", "content": SUMMARY_PROMPT}], owner="default")
    headings = [line for line in reply.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Session Title",
        "## Current State",
        "## Task & Goals",
        "## Key Facts & Decisions",
        "## Files & Context",
        "## Errors & Corrections",
        "## Open Issues",
    ]
    facts = reply.split("## Key Facts & Decisions")[1].split("## Files")[0]
    assert "- The deadline is Friday." in facts
    assert "- Hi, I prefer dark theme. It also applies to the terminal." in facts
    assert "We decided to keep config" in facts
    assert "conf/app.toml" in reply.split("## Files & Context")[1]
    assert "Is that ok?" in reply.split("## Open Issues")[1]


def test_parses_numbered_extraction_lines() -> None:
    lines = parse_extraction_conversation(EXTRACTION_HISTORY)
    assert lines == [
        ConversationLine("user", "I prefer tabs over spaces.\nAlways.", "user", 0),
        ConversationLine("user", "Bob here, I decided to move to Paris.", "bob", 1),
        ConversationLine("assistant", "ok", "assistant", 2),
        ConversationLine("user", "Please remember my cat is called Tom.", "user", 3),
    ]


def test_extraction_reply_is_valid_sdk_program() -> None:
    reply = extraction_reply(parse_extraction_conversation(EXTRACTION_HISTORY), owner="default")
    calls = [node.value for node in ast.parse(reply).body if isinstance(node, ast.Expr)]
    assert isinstance(calls[-1], ast.Call)
    names = [ast.unparse(call.func) for call in calls if isinstance(call, ast.Call)]
    assert names == ["sdk.create_preferences", "sdk.create_events", "sdk.create_entities", "sdk.commit"]
    preference, event, entity = (call for call in calls[:3] if isinstance(call, ast.Call))
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in preference.keywords}
    assert kwargs == {
        "user": "default",
        "topic": "tabs_over",
        "content": "- I prefer tabs over spaces.\nAlways.",
    }
    event_kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in event.keywords}
    assert event_kwargs["peer_id"] == "bob"
    assert event_kwargs["ranges"] == "1"
    assert all(kw.arg is not None for kw in entity.keywords)


def test_plain_conversation_means_no_changes() -> None:
    lines = [ConversationLine("user", "hello there", "user", 0)]
    assert extraction_reply(lines, owner="default") == "sdk.commit()\n"
    assert "- None." in working_memory_reply([])


def test_quotes_in_content_stay_valid() -> None:
    lines = [ConversationLine("user", 'I prefer "quoted" names\\paths"', "user", 0)]
    reply = extraction_reply(lines, owner="default")
    ast.parse(reply)


def test_http_endpoint_and_failure_switch() -> None:
    with StandinLlm() as llm, httpx.Client(base_url=llm.base_url) as client:
        assert client.get("/models").json()["data"][0]["id"]
        body = {"model": "m", "messages": [{"role": "user", "content": EXTRACTION_HISTORY}]}
        reply = client.post("/chat/completions", json=body)
        assert reply.status_code == httpx.codes.OK
        assert reply.json()["choices"][0]["message"]["content"].endswith("sdk.commit()\n")
        llm.fail = True
        assert client.post("/chat/completions", json=body).status_code == httpx.codes.INTERNAL_SERVER_ERROR
        assert llm.kinds_seen() == ["extraction", "extraction"]
