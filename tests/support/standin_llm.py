"""A deterministic OpenAI-compatible chat endpoint that answers OpenViking's two phase-2 prompts.

Test-only. OpenViking sends (observed against 0.5.2, see tests/localstack/test_standin_llm.py):

* working-memory summary: one user message whose conversation sits between ``<session_content>``
  tags as ``[role]: text`` lines (later commits add the previous summary between
  ``<previous_working_memory>`` tags); the reply (Markdown, 7 fixed sections) becomes the overview;
* long-term extraction: a system prompt describing a restricted Python "memory SDK" plus a user
  message ``## Conversation History`` with numbered lines ``[idx][role][speaker]: text`` (speaker is
  the message's peer_id, else the role); the reply must be ``sdk.*(...)`` calls ending in ``sdk.commit()``.

Heuristics, from user lines: "prefer" -> a preference; "decide(d)" -> an event; "remember" -> an
entity card. Anything else is answered with ``sdk.commit()`` (no changes).

An agent host's requests (streamed, or offering ``tools``) get the scripted agent replies of
``tests.support.standin_chat`` instead, as SSE when asked to stream.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from tests.support.standin_chat import agent_reply, completion, content_text, stream_events

WORKING_MEMORY_OPEN = "<session_content>"
WORKING_MEMORY_CLOSE = "</session_content>"
PREVIOUS_MEMORY_OPEN = "<previous_working_memory>"
PREVIOUS_MEMORY_CLOSE = "</previous_working_memory>"
KEY_FACTS_HEADING = "## Key Facts & Decisions"
EXTRACTION_MARKER = "## Conversation History"
MODEL_ID = "standin-llm"

PromptKind = Literal["working_memory", "extraction", "other"]

_NUMBERED_LINE = re.compile(r"^\[(\d+)\]\[([^\]]+)\]\[([^\]]+)\]: ?(.*)$")
_PLAIN_LINE = re.compile(r"^\[([A-Za-z_]+)\]: ?(.*)$")
_PREFER = re.compile(r"\bprefer(?:s|red)?\b", re.IGNORECASE)
_DECIDE = re.compile(r"\bdecid(?:e|ed|es)\b", re.IGNORECASE)
_REMEMBER = re.compile(r"\bremember\b", re.IGNORECASE)
_KEY_FACT = re.compile(r"\b(?:decid(?:e|ed|es)|prefer(?:s|red)?|remember)\b", re.IGNORECASE)
_PATH = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.\w+")
_STOPWORDS = frozenset(
    "a an the to in on my for of with and or use using that this it is i we".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class ConversationLine:
    """One message as OpenViking rendered it into a prompt."""

    role: str
    text: str
    speaker: str
    """peer_id of the message, else its role (extraction prompt only; equals role otherwise)."""
    index: int | None = None
    """Position in the extraction batch (what ``ranges`` refers to); None in the summary prompt."""


def classify(messages: Sequence[dict[str, Any]]) -> PromptKind:
    """Which of OpenViking's requests this is, from the chat messages it sent."""
    texts = [content_text(message) for message in messages]
    if any(WORKING_MEMORY_OPEN in text for text in texts):
        return "working_memory"
    if any(text.lstrip().startswith(EXTRACTION_MARKER) for text in texts):
        return "extraction"
    return "other"


def parse_working_memory_conversation(prompt: str) -> list[ConversationLine]:
    """The ``[role]: text`` lines between the session_content tags (continuation lines joined)."""
    start = prompt.find(WORKING_MEMORY_OPEN)
    end = prompt.find(WORKING_MEMORY_CLOSE, start)
    if start < 0 or end < 0:
        return []
    body = prompt[start + len(WORKING_MEMORY_OPEN) : end]
    lines: list[ConversationLine] = []
    for raw in body.strip("\n").splitlines():
        match = _PLAIN_LINE.match(raw)
        if match:
            lines.append(ConversationLine(role=match[1], text=match[2], speaker=match[1]))
        elif lines:
            lines[-1] = _continued(lines[-1], raw)
    return lines


def parse_previous_key_facts(prompt: str) -> list[str]:
    """Key-fact bullets of the previous Working Memory a later commit sends along (else [])."""
    start = prompt.find(PREVIOUS_MEMORY_OPEN)
    end = prompt.find(PREVIOUS_MEMORY_CLOSE, start)
    if start < 0 or end < 0:
        return []
    facts: list[str] = []
    in_section = False
    for raw in prompt[start + len(PREVIOUS_MEMORY_OPEN) : end].splitlines():
        if raw.startswith("## "):
            in_section = raw.strip() == KEY_FACTS_HEADING
        elif in_section and raw.startswith("- ") and raw.strip() != "- None.":
            facts.append(raw[2:].strip())
    return facts


def parse_extraction_conversation(prompt: str) -> list[ConversationLine]:
    """The numbered ``[idx][role][speaker]: text`` lines of the extraction request."""
    lines: list[ConversationLine] = []
    in_history = False
    for raw in prompt.splitlines():
        match = _NUMBERED_LINE.match(raw)
        if match:
            in_history = True
            lines.append(
                ConversationLine(role=match[2], speaker=match[3], text=match[4], index=int(match[1]))
            )
        elif in_history and raw.startswith("After exploring"):
            break
        elif in_history and lines:
            lines[-1] = _continued(lines[-1], raw)
    return [_strip_trailing_blank(line) for line in lines]


def working_memory_reply(lines: Sequence[ConversationLine], previous_facts: Sequence[str] = ()) -> str:
    """The 7-section Working Memory document, derived from the conversation (plus carried-over facts)."""
    user_lines = [line.text for line in lines if line.role == "user"]
    first = user_lines[0] if user_lines else "empty session"
    title = " ".join(first.split()[:8])
    new_facts = [" ".join(text.split()) for text in user_lines if _KEY_FACT.search(text)]
    facts = list(dict.fromkeys([*previous_facts, *new_facts]))
    paths = sorted({path for line in lines for path in _PATH.findall(line.text)})
    questions = [text for text in user_lines if text.rstrip().endswith("?")]
    last = user_lines[-1] if user_lines else "nothing yet"
    sections = {
        "Session Title": [title],
        "Current State": [f"{len(lines)} messages so far; the latest user message: {last}"],
        "Task & Goals": _bullets(user_lines[:3]),
        KEY_FACTS_HEADING[3:]: _bullets(facts),
        "Files & Context": _bullets(paths),
        "Errors & Corrections": _bullets([]),
        "Open Issues": _bullets(questions),
    }
    parts = ["# Working Memory", ""]
    for name, body in sections.items():
        parts += [f"## {name}", *body, ""]
    return "\n".join(parts).rstrip() + "\n"


def extraction_reply(lines: Sequence[ConversationLine], owner: str) -> str:
    """Memory-SDK calls for preferences, decisions (events) and "remember" facts (entities)."""
    calls: list[str] = []
    for line in lines:
        if line.role != "user":
            continue
        peer = f"peer_id={_literal(line.speaker)}, " if line.speaker != line.role else ""
        text = line.text.strip()
        if _PREFER.search(text):
            topic = _slug(_words_after(_PREFER, text)) or "general"
            calls.append(
                f"sdk.create_preferences({peer}user={_literal(owner)}, topic={_literal(topic)}, "
                f"content={_literal('- ' + text)})"
            )
        if _DECIDE.search(text):
            name = _slug(_words_after(_DECIDE, text)) or "decision"
            calls.append(
                f"sdk.create_events({peer}event_name={_literal(name + '_decided')}, "
                f"goal={_literal('Record a decision')}, summary={_literal(text)}, "
                f"ranges={_literal(str(line.index if line.index is not None else 0))})"
            )
        if _REMEMBER.search(text):
            name = _slug(_words_after(_REMEMBER, text)) or "note"
            card = f"# {name}\nSomething the user asked to remember.\n\n## Description\n- {text}"
            calls.append(
                f"sdk.create_entities({peer}category={_literal('remembered_fact')}, "
                f"name={_literal(name)}, content={_literal(card)})"
            )
    return "\n".join([*calls, "sdk.commit()"]) + "\n"


def reply_for(messages: Sequence[dict[str, Any]], owner: str) -> str:
    """The assistant text for one chat-completions request."""
    kind = classify(messages)
    texts = "\n".join(content_text(message) for message in messages)
    if kind == "working_memory":
        return working_memory_reply(parse_working_memory_conversation(texts), parse_previous_key_facts(texts))
    if kind == "extraction":
        return extraction_reply(parse_extraction_conversation(texts), owner)
    return "sdk.commit()\n"


@dataclass
class StandinLlm:
    """The HTTP server; ``base_url`` is what goes into OpenViking's ``vlm.api_base``.

    Use as a context manager or call ``start()``/``close()``.
    """

    owner: str = "default"
    """Value for ``user=`` in preferences. The prompt carries no account user id; OpenViking
    stores the memory under the committing user's space whatever this says."""
    fail: bool = False
    """When true every chat request gets HTTP 500 (for failure tests)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every chat-completions body received, in order."""
    log_path: Path | None = None
    """When set, every body received is also appended there as one JSON line."""
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("StandinLlm is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> StandinLlm:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="standin-llm", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> StandinLlm:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def kinds_seen(self) -> list[PromptKind]:
        return [classify(body.get("messages", [])) for body in self.requests]

    def agent_requests(self) -> list[dict[str, Any]]:
        """The bodies an agent host sent (not OpenViking's summary/extraction prompts)."""
        return [body for body in self.requests if is_agent_request(body)]

    def record(self, body: dict[str, Any]) -> int:
        """Log one request; its index."""
        self.requests.append(body)
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(body) + "\n")
        return len(self.requests) - 1


def is_agent_request(body: dict[str, Any]) -> bool:
    return bool(body.get("stream")) or "tools" in body


def _handler_for(llm: StandinLlm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "body is not JSON"}})
                return
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": "not found"}})
                return
            index = llm.record(body)
            if llm.fail:
                self._send(500, {"error": {"message": "stand-in LLM told to fail", "type": "server_error"}})
                return
            messages, model = body.get("messages", []), body.get("model", MODEL_ID)
            if not is_agent_request(body):
                self._send(200, _completion(model, reply_for(messages, llm.owner)))
                return
            reply = agent_reply(messages)
            if not body.get("stream"):
                self._send(200, completion(model, reply, messages, index))
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for event in stream_events(model, reply, messages, index):
                self.wfile.write(event)
                self.wfile.flush()
            self.close_connection = True

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the default stderr access log."""

    return Handler


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-standin-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _continued(line: ConversationLine, more: str) -> ConversationLine:
    return ConversationLine(line.role, f"{line.text}\n{more}", line.speaker, line.index)


def _strip_trailing_blank(line: ConversationLine) -> ConversationLine:
    return ConversationLine(line.role, line.text.rstrip("\n "), line.speaker, line.index)


def _bullets(items: Iterable[str]) -> list[str]:
    listed = [f"- {' '.join(item.split())}" for item in items]
    return listed or ["- None."]


def _words_after(pattern: re.Pattern[str], text: str) -> list[str]:
    match = pattern.search(text)
    tail = text[match.end() :] if match else text
    words = re.findall(r"[A-Za-z0-9]+", tail.lower())
    return [word for word in words if word not in _STOPWORDS][:2]


def _slug(words: Sequence[str]) -> str:
    return "_".join(words)


def _literal(text: str) -> str:
    """A triple-quoted literal, as the extraction prompt asks for natural-language arguments."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"""{escaped}"""'
