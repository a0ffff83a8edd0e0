"""The stand-in model in the shapes an agent host (OpenClaw's openai-completions) uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from tests.support.standin_chat import agent_reply
from tests.support.standin_llm import StandinLlm

TOOLS = [{"type": "function", "function": {"name": "memory_store", "parameters": {"type": "object"}}}]
SYSTEM = {"role": "system", "content": "You are a helpful agent."}


def sse_chunks(body: str) -> tuple[list[dict[str, Any]], bool]:
    events = [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]
    done = events[-1] == "[DONE]"
    return [json.loads(e) for e in events if e != "[DONE]"], done


def post(llm: StandinLlm, messages: list[dict[str, Any]], *, stream: bool = True) -> httpx.Response:
    body = {"model": "m", "stream": stream, "tools": TOOLS, "tool_choice": "auto", "messages": messages}
    return httpx.post(f"{llm.base_url}/chat/completions", json=body, timeout=10)


def test_a_scripted_tool_call_streams_then_the_answer_follows_the_tool_result(tmp_path: Path) -> None:
    prompt = {"role": "user", "content": 'Keep this. [[call memory_store {"text": "we use Postgres"}]]'}
    with StandinLlm(log_path=tmp_path / "requests.jsonl") as llm:
        first = post(llm, [SYSTEM, prompt])
        assert first.headers["content-type"] == "text/event-stream"
        chunks, done = sse_chunks(first.text)
        assert done
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
        assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
        calls = [
            c for ch in chunks for choice in ch["choices"] for c in choice["delta"].get("tool_calls", [])
        ]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            ("memory_store", {"text": "we use Postgres"})
        ]
        call_id = calls[0]["id"]
        assert call_id.isalnum()

        followed = [
            SYSTEM,
            prompt,
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": call_id, "content": "stored"},
            {"role": "user", "content": "<internal-context>nothing</internal-context>"},
        ]
        chunks, done = sse_chunks(post(llm, followed).text)
        text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
        assert done and chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert text.startswith("Stand-in answer after 1 tool result(s) to: Keep this.")

        plain = post(llm, [SYSTEM, {"role": "user", "content": "hello"}], stream=False).json()
        assert plain["choices"][0]["message"]["content"].startswith("Stand-in answer")
        logged = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
        assert logged == llm.requests == llm.agent_requests()
        assert len(logged) == 3


def test_history_and_injected_recall_are_not_this_turn() -> None:
    history = [
        {"role": "user", "content": '[[call memory_store {"text": "old"}]]'},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "memory_store"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "r", "function": {"name": "memory_recall_auto"}}],
        },
        {"role": "tool", "tool_call_id": "r", "content": "{}"},
        {"role": "user", "content": '[[call memory_expand {"checkpoint_id": "x"}]]'},
    ]
    reply = agent_reply(history)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("memory_expand", '{"checkpoint_id": "x"}')]


@given(st.lists(st.sampled_from(["memory_store", "memory_recall", "memory_expand"]), max_size=4))
def test_every_directive_is_called_once_in_order(names: list[str]) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": " ".join(f'[[call {n} {{"i": {i}}}]]' for i, n in enumerate(names))}
    ]
    made = []
    for _ in range(len(names) + 1):
        reply = agent_reply(messages)
        if not reply.tool_calls:
            break
        call = reply.tool_calls[0]
        made.append((call.name, json.loads(call.arguments)["i"]))
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "x", "function": {"name": call.name}}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": "x", "content": "r"})
    assert made == [(n, i) for i, n in enumerate(names)]
    assert agent_reply(messages).text
