"""Readers for the files of a session archive (`memory_diff.json`, `.meta.json`, `.done`, ...)."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel

from shared.errors import BackendError, BackendNotFound
from shared.openviking._content_api import ContentApi
from shared.openviking.models._base import parse_result
from shared.openviking.models.archive_files import ArchiveDone, ArchiveFailure, ArchiveMeta, MemoryDiff
from shared.openviking.tenant import Tenant

_ModelT = TypeVar("_ModelT", bound=BaseModel)


def archive_uri_for(tenant: Tenant, session_id: str, archive_id: str) -> str:
    """`viking://user/<u>/sessions/<id>/history/<archive_id>`."""
    return f"viking://user/{tenant.user_id}/sessions/{session_id}/history/{archive_id}"


class ArchiveFilesApi(ContentApi):
    async def _read_json_file(
        self, tenant: Tenant, uri: str, model: type[_ModelT], deadline: float | None
    ) -> _ModelT | None:
        try:
            text = await self.read(tenant, uri, raw=True, deadline=deadline)
        except BackendNotFound:
            return None
        try:
            value: Any = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise BackendError(f"{uri} is not JSON", code="INVALID_RESPONSE") from exc
        return parse_result(model, value, uri)

    async def read_memory_diff(
        self, tenant: Tenant, archive_uri: str, *, deadline: float | None = None
    ) -> MemoryDiff | None:
        """The archive's memory adds/updates/deletes; None when extraction did not run."""
        return await self._read_json_file(
            tenant, f"{archive_uri.rstrip('/')}/memory_diff.json", MemoryDiff, deadline
        )

    async def read_archive_meta(
        self, tenant: Tenant, archive_uri: str, *, deadline: float | None = None
    ) -> ArchiveMeta | None:
        """The archive's `.meta.json` (archived/retained message ids); None if absent."""
        return await self._read_json_file(
            tenant, f"{archive_uri.rstrip('/')}/.meta.json", ArchiveMeta, deadline
        )

    async def read_archive_done(
        self, tenant: Tenant, archive_uri: str, *, deadline: float | None = None
    ) -> ArchiveDone | None:
        """`.done` once phase 2 completed; None before (or after a failure)."""
        return await self._read_json_file(tenant, f"{archive_uri.rstrip('/')}/.done", ArchiveDone, deadline)

    async def read_archive_failure(
        self, tenant: Tenant, archive_uri: str, *, deadline: float | None = None
    ) -> ArchiveFailure | None:
        """`.failed.json` when phase 2 failed; None otherwise."""
        return await self._read_json_file(
            tenant, f"{archive_uri.rstrip('/')}/.failed.json", ArchiveFailure, deadline
        )
