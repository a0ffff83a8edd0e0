"""Builders for host messages, seeding the real OpenViking, and a lookalike OpenViking server.

The lookalike is a real local HTTP server (slow or answering 503) for the failure cases only;
everything else runs against the session's real OpenViking.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from contextengine.v1 import common_pb2

from shared.openviking.client import OpenVikingClient
from shared.openviking.models.search import SearchHit
from shared.openviking.tenant import Tenant

ACCOUNT = f"ce-asm-{uuid.uuid4().hex[:8]}"


def text_block(text: str) -> common_pb2.ContentBlock:
    return common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))


def user(text: str, msg_id: str = "") -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=msg_id, role=common_pb2.MESSAGE_ROLE_USER, content=[text_block(text)]
    )


def assistant(text: str = "", calls: Sequence[tuple[str, str]] = ()) -> common_pb2.ConversationMessage:
    blocks = [text_block(text)] if text else []
    for call_id, name in calls:
        blocks.append(
            common_pb2.ContentBlock(
                tool_call=common_pb2.ToolCallBlock(
                    id=call_id, name=name, arguments=common_pb2.JsonValue(json=json.dumps({"x": 1}))
                )
            )
        )
    return common_pb2.ConversationMessage(role=common_pb2.MESSAGE_ROLE_ASSISTANT, content=blocks)


def tool_result(call_id: str, text: str, name: str = "tool") -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        role=common_pb2.MESSAGE_ROLE_TOOL_RESULT,
        content=[
            common_pb2.ContentBlock(
                tool_result=common_pb2.ToolResultBlock(
                    tool_call_id=call_id, tool_name=name, content=[text_block(text)]
                )
            )
        ],
    )


def hit(
    uri: str, score: float, abstract: str | None = None, level: int = 2, tags: Sequence[str] = ()
) -> SearchHit:
    return SearchHit(
        uri=uri,
        score=score,
        abstract=f"abstract of {uri}" if abstract is None else abstract,
        level=level,
        tags=list(tags),
    )


async def seed(
    client: OpenVikingClient, tenant: Tenant, memories: Mapping[str, str | tuple[str, Sequence[str]]]
) -> None:
    """Write `{uri: text | (text, tags)}` into the real OpenViking, each findable on return."""
    for uri, value in memories.items():
        text, tags = (value, ()) if isinstance(value, str) else value
        await client.write(tenant, uri, text, wait=True, tags=list(tags) or None)


def unique_tenant(prefix: str) -> Tenant:
    """A user of its own per test, so that tests sharing one OpenViking never see each other."""
    return Tenant(ACCOUNT, f"{prefix}-{uuid.uuid4().hex[:8]}")


@dataclass
class SeenRequest:
    method: str
    path: str
    body: dict[str, Any]


class RecordingTransport(httpx.AsyncBaseTransport):
    """httpx's real network transport, noting every request it sends (to see what was asked)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.requests: list[SeenRequest] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        self.requests.append(SeenRequest(request.method, request.url.path, body))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def finds(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == "/api/v1/search/find"]


class LookalikeOpenViking:
    """A real local HTTP server answering like OpenViking: every call after `delay` seconds, with
    an empty result (reads: 404) or, when `status` is 503, OpenViking's unavailable error."""

    def __init__(self, *, delay: float = 0.0, status: int = 200) -> None:
        self.delay = delay
        self.status = status
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LookalikeOpenViking:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(server.delay)
                if server.status != 200:
                    self._error(server.status, "UNAVAILABLE", "service unavailable")
                else:
                    self._error(404, "NOT_FOUND", f"not found: {self.path}")

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                time.sleep(server.delay)
                if server.status != 200:
                    self._error(server.status, "UNAVAILABLE", "service unavailable")
                    return
                empty = {"memories": [], "resources": [], "skills": [], "total": 0}
                self._reply(200, {"status": "ok", "result": empty})

            def _error(self, status: int, code: str, message: str) -> None:
                self._reply(status, {"status": "error", "error": {"code": code, "message": message}})

            def _reply(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its deadline passed) while we slept

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler
