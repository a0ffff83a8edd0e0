"""The narrow slices of the OpenViking client that assembly uses (tests hand in local parts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared.domain.turn_index_folders import FolderLister
from shared.openviking.models.search import FindResult, GrepResult
from shared.openviking.tenant import Tenant


class Grep(Protocol):
    """OpenViking's full-text search over a folder."""

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
    ) -> GrepResult: ...


class MemorySearch(Grep, Protocol):
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
    ) -> FindResult: ...

    async def read(
        self,
        tenant: Tenant,
        uri: str,
        *,
        offset: int = 0,
        limit: int = -1,
        raw: bool = False,
        deadline: float | None = None,
    ) -> str: ...


class AssemblyBackend(MemorySearch, FolderLister, Protocol):
    """Everything assembly reads from OpenViking."""
