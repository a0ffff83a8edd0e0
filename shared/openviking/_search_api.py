"""Retrieval endpoints: semantic find/search and regex grep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from shared.openviking._base_api import ApiBase
from shared.openviking.envelope import Envelope, unwrap_as
from shared.openviking.http import HttpResponse
from shared.openviking.models._base import parse_result
from shared.openviking.models.search import FindResult, GrepResult
from shared.openviking.settings import CallKind
from shared.openviking.tenant import Tenant


def _retrieval_body(
    *,
    query: str,
    target_uri: str | Sequence[str] | None,
    limit: int | None,
    score_threshold: float | None,
    level: int | Sequence[int] | None,
    tags: Sequence[str] | None,
    read_content: bool | None,
    since: str | None,
    until: str | None,
    context_type: str | Sequence[str] | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "query": query,
        "target_uri": target_uri if isinstance(target_uri, str) or target_uri is None else list(target_uri),
        "limit": limit,
        "score_threshold": score_threshold,
        "level": level if isinstance(level, int) or level is None else list(level),
        "tags": None if tags is None else list(tags),
        "read_content": read_content,
        "since": since,
        "until": until,
        "context_type": (
            context_type if isinstance(context_type, str) or context_type is None else list(context_type)
        ),
    }
    return {key: value for key, value in fields.items() if value is not None}


def _find_result(response: HttpResponse) -> Envelope:
    """find's answer decoded and validated in one pass (it is the largest answer on the hot path)."""
    return Envelope(result=unwrap_as(response, FindResult, "find"))


class SearchApi(ApiBase):
    async def find(
        self,
        tenant: Tenant,
        query: str,
        *,
        target_uri: str | Sequence[str] | None = None,
        limit: int | None = None,
        score_threshold: float | None = None,
        level: int | Sequence[int] | None = None,
        tags: Sequence[str] | None = None,
        read_content: bool | None = None,
        since: str | None = None,
        until: str | None = None,
        context_type: str | Sequence[str] | None = None,
        deadline: float | None = None,
    ) -> FindResult:
        """Plain semantic search (`POST /search/find`); use `viking://~/memories` for own memories.

        `limit` must be ≥1 (0 is a 400). Pass `level=2` for memory files only.
        """
        body = _retrieval_body(
            query=query,
            target_uri=target_uri,
            limit=limit,
            score_threshold=score_threshold,
            level=level,
            tags=tags,
            read_content=read_content,
            since=since,
            until=until,
            context_type=context_type,
        )
        envelope = await self._request(
            "POST",
            "/api/v1/search/find",
            tenant=tenant,
            kind=CallKind.SEARCH,
            idempotent=True,
            deadline=deadline,
            json=body,
            decode=_find_result,
        )
        return cast(FindResult, envelope.result)

    async def grep(
        self,
        tenant: Tenant,
        uri: str,
        pattern: str,
        *,
        case_insensitive: bool = False,
        node_limit: int | None = None,
        tags: Sequence[str] | None = None,
        before_context: int | None = None,
        after_context: int | None = None,
        deadline: float | None = None,
    ) -> GrepResult:
        """Regex search over files under `uri` (works on session history)."""
        fields: dict[str, Any] = {
            "uri": uri,
            "pattern": pattern,
            "case_insensitive": case_insensitive,
            "node_limit": node_limit,
            "tags": None if tags is None else list(tags),
            "before_context": before_context,
            "after_context": after_context,
        }
        envelope = await self._request(
            "POST",
            "/api/v1/search/grep",
            tenant=tenant,
            kind=CallKind.SEARCH,
            idempotent=True,
            deadline=deadline,
            json={key: value for key, value in fields.items() if value is not None},
        )
        return parse_result(GrepResult, envelope.result, "grep")
