"""Content endpoints: read/abstract/overview, write, batch-write and tags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from shared.errors import BackendError
from shared.openviking._base_api import ApiBase
from shared.openviking.models._base import parse_result
from shared.openviking.models.content import BatchWriteResult, WriteResult
from shared.openviking.settings import CallKind, write_kind
from shared.openviking.tenant import Tenant

WriteMode = Literal["replace", "append", "create"]
TagMode = Literal["replace", "append", "clear"]
ProcessingMode = Literal["semantic_and_vectors", "vectors_only"]


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BackendError(f"unexpected OpenViking result for {what}: not a string", code="INVALID_RESPONSE")
    return value


class ContentApi(ApiBase):
    async def read(
        self,
        tenant: Tenant,
        uri: str,
        *,
        offset: int = 0,
        limit: int = -1,
        raw: bool = False,
        deadline: float | None = None,
    ) -> str:
        """File text; `offset`/`limit` count lines. A missing file is 404 `BackendNotFound`."""
        envelope = await self._request(
            "GET",
            "/api/v1/content/read",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"uri": uri, "offset": offset, "limit": limit, "raw": raw},
        )
        return _text(envelope.result, "content read")

    async def abstract(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> str:
        """The L0 abstract of a directory (or archive summary)."""
        envelope = await self._request(
            "GET",
            "/api/v1/content/abstract",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"uri": uri},
        )
        return _text(envelope.result, "content abstract")

    async def overview(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> str:
        """The L1 overview of a directory (or archive summary)."""
        envelope = await self._request(
            "GET",
            "/api/v1/content/overview",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"uri": uri},
        )
        return _text(envelope.result, "content overview")

    async def write(
        self,
        tenant: Tenant,
        uri: str,
        content: str,
        *,
        mode: WriteMode = "replace",
        wait: bool = False,
        tags: Sequence[str] | None = None,
        tag_mode: TagMode | None = None,
        processing_mode: ProcessingMode | None = None,
        deadline: float | None = None,
    ) -> WriteResult:
        """Write a file (parents created); `wait=True` returns once it is indexed and findable.

        Retried on 502/503/connection errors unless `mode="append"`.
        """
        fields: dict[str, Any] = {
            "uri": uri,
            "content": content,
            "mode": mode,
            "wait": wait,
            "tags": None if tags is None else list(tags),
            "tag_mode": tag_mode,
            "processing_mode": processing_mode,
        }
        envelope = await self._request(
            "POST",
            "/api/v1/content/write",
            tenant=tenant,
            kind=write_kind(wait=wait),
            idempotent=mode != "append",
            deadline=deadline,
            json={key: value for key, value in fields.items() if value is not None},
        )
        return parse_result(WriteResult, envelope.result, "content write")

    async def batch_write(
        self,
        tenant: Tenant,
        root_uri: str,
        operations: Sequence[Mapping[str, Any]],
        *,
        wait: bool = True,
        skip_conflicts: bool | None = None,
        processing_mode: ProcessingMode | None = None,
        defer_processing: bool | None = None,
        deadline: float | None = None,
    ) -> BatchWriteResult:
        """Several writes with one index refresh. Each operation is `{uri, content, mode, tags?...}`.

        Retried only when no operation appends.
        """
        fields: dict[str, Any] = {
            "root_uri": root_uri,
            "operations": [dict(op) for op in operations],
            "wait": wait,
            "skip_conflicts": skip_conflicts,
            "processing_mode": processing_mode,
            "defer_processing": defer_processing,
        }
        envelope = await self._request(
            "POST",
            "/api/v1/content/batch-write",
            tenant=tenant,
            kind=write_kind(wait=wait),
            idempotent=all(op.get("mode", "replace") != "append" for op in operations),
            deadline=deadline,
            json={key: value for key, value in fields.items() if value is not None},
        )
        return parse_result(BatchWriteResult, envelope.result, "content batch-write")

    async def set_tags(
        self,
        tenant: Tenant,
        uri: str,
        tags: Sequence[str],
        *,
        mode: TagMode = "replace",
        recursive: bool = False,
        deadline: float | None = None,
    ) -> None:
        """Set `key=value` tags (lower-cased by the server; one value per key)."""
        await self._request(
            "POST",
            "/api/v1/content/set_tags",
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=True,
            deadline=deadline,
            json={"uri": uri, "tags": list(tags), "mode": mode, "recursive": recursive},
        )
