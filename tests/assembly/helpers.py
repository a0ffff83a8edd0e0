"""Builders for host messages, seeding the real OpenViking, a lookalike OpenViking server, and a
clock and a poll for caches that age.

The lookalike is a real local HTTP server (slow or answering 503) for the failure cases only;
everything else runs against the session's real OpenViking.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from contextengine.v1 import common_pb2

from shared.openviking.client import OpenVikingClient
from shared.openviking.http import HttpRequest, HttpResponse, Send
from shared.openviking.models.search import SearchHit
from shared.openviking.tenant import Tenant

ACCOUNT = f"ce-asm-{uuid.uuid4().hex[:8]}"
T = TypeVar("T")
POLLS = 1500
"""Asks, 20 ms apart, before `polled` gives up (30 s)."""


class ManualClock:
    """A monotonic clock a test moves by hand (`now`)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


async def polled(ask: Callable[[], Awaitable[T]], until: Callable[[T], bool]) -> T:
    """`ask()` again (the clock standing still) until its answer satisfies `until`."""
    for _ in range(POLLS):
        answer = await ask()
        if until(answer):
            return answer
        await asyncio.sleep(0.02)
    raise AssertionError(f"still {answer!r} after {POLLS} asks")


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
    uri: str = ""
    """The `uri` query parameter (reads, listings), "" without one."""


class RequestRecorder:
    """HTTP middleware noting every request sent over the real network (to see what was asked)."""

    def __init__(self) -> None:
        self.requests: list[SeenRequest] = []

    async def __call__(self, request: HttpRequest, send: Send) -> HttpResponse:
        uri = dict(request.query).get("uri", "")
        self.requests.append(SeenRequest(request.method, request.path, request.json_body(), uri))
        return await send(request)

    def finds(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == "/api/v1/search/find"]
