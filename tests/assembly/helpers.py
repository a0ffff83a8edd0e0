"""Builders for host messages and an in-memory stand-in for the OpenViking reads assembly uses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextengine.v1 import common_pb2, packet_pb2

from shared.domain.identity import RequestIdentity
from shared.errors import BackendNotFound, BackendUnavailable
from shared.openviking.models.search import FindResult, SearchHit
from shared.openviking.models.sessions import SessionContext
from shared.openviking.tenant import Tenant

TENANT = Tenant("acme", "alice")
IDENTITY = RequestIdentity(TENANT, "main", "host-session-1", "")


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


@dataclass
class FakeBackend:
    """Answers find/read/get_session_context from dicts; can be made slow or down."""

    user_hits: list[SearchHit] = field(default_factory=list)
    agent_hits: list[SearchHit] = field(default_factory=list)
    preference_hits: list[SearchHit] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    overviews: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    down: bool = False
    finds: list[dict[str, object]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)

    async def _enter(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.down:
            raise BackendUnavailable("connection refused", http_status=0)

    async def find(self, tenant: Tenant, query: str, **kwargs: object) -> FindResult:
        self.finds.append({"query": query, **kwargs})
        await self._enter()
        if kwargs.get("target_uri") == "viking://~/memories/preferences":
            return FindResult(memories=self.preference_hits)
        return FindResult(memories=self.agent_hits if kwargs.get("tags") else self.user_hits)

    async def read(self, tenant: Tenant, uri: str, **kwargs: object) -> str:
        self.reads.append(uri)
        await self._enter()
        if uri not in self.files:
            raise BackendNotFound(f"not found: {uri}", http_status=404, code="NOT_FOUND")
        return self.files[uri]

    async def get_session_context(self, tenant: Tenant, session_id: str, **kwargs: object) -> SessionContext:
        await self._enter()
        if session_id not in self.overviews:
            raise BackendNotFound("no session", http_status=404, code="NOT_FOUND")
        return SessionContext(latest_archive_overview=self.overviews[session_id])


@dataclass
class FixedSummaries:
    summaries: list[packet_pb2.CompactSummary] = field(default_factory=list)
    delay: float = 0.0

    async def latest_summaries(
        self, identity: RequestIdentity, deadline: float
    ) -> list[packet_pb2.CompactSummary]:
        if self.delay:
            await asyncio.sleep(self.delay)
        return list(self.summaries)
