"""Filesystem endpoints: ls, stat, attrs, mkdir and rm ("forget")."""

from __future__ import annotations

from typing import Any

from shared.openviking._base_api import ApiBase
from shared.openviking.models._base import parse_list, parse_result
from shared.openviking.models.content import FsAttrs, FsEntry, FsListing, FsStat, RemoveResult
from shared.openviking.settings import CallKind
from shared.openviking.tenant import Tenant


class FsApi(ApiBase):
    async def ls(
        self,
        tenant: Tenant,
        uri: str,
        *,
        recursive: bool = False,
        show_all_hidden: bool = False,
        node_limit: int | None = None,
        offset: int | None = None,
        deadline: float | None = None,
    ) -> FsListing:
        envelope = await self._request(
            "GET",
            "/api/v1/fs/ls",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={
                "uri": uri,
                "recursive": recursive,
                "show_all_hidden": show_all_hidden,
                "node_limit": node_limit,
                "offset": offset,
            },
        )
        entries = parse_list(FsEntry, envelope.result, "fs ls")
        return FsListing(entries=entries, has_more=envelope.has_more)

    async def stat(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> FsStat:
        envelope = await self._request(
            "GET",
            "/api/v1/fs/stat",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"uri": uri},
        )
        return parse_result(FsStat, envelope.result, "fs stat")

    async def attrs(self, tenant: Tenant, uri: str, *, deadline: float | None = None) -> FsAttrs:
        """Tags and (for memories) the memory fields of a file."""
        envelope = await self._request(
            "GET",
            "/api/v1/fs/attrs",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"uri": uri},
        )
        result: Any = envelope.result
        if isinstance(result, dict) and isinstance(result.get("attrs"), dict):
            result = {**result, **result["attrs"]}
        return parse_result(FsAttrs, result, "fs attrs")

    async def mkdir(
        self, tenant: Tenant, uri: str, *, description: str | None = None, deadline: float | None = None
    ) -> None:
        body: dict[str, Any] = {"uri": uri}
        if description is not None:
            body["description"] = description
        await self._request(
            "POST",
            "/api/v1/fs/mkdir",
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=False,
            deadline=deadline,
            json=body,
        )

    async def rm(
        self,
        tenant: Tenant,
        uri: str,
        *,
        recursive: bool = False,
        wait: bool = False,
        deadline: float | None = None,
    ) -> RemoveResult:
        """Delete a file or (with `recursive`) a directory; removed memories leave find results.

        A missing path is not an error (count 0).
        """
        envelope = await self._request(
            "DELETE",
            "/api/v1/fs",
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=True,
            deadline=deadline,
            params={"uri": uri, "recursive": recursive, "wait": wait},
        )
        return parse_result(RemoveResult, envelope.result, "fs rm")
