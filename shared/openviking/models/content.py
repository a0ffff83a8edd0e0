"""Content and filesystem results."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.openviking.models._base import ResultModel


class WriteResult(ResultModel):
    """`POST /content/write`; `task_id` only when `wait=False`."""

    uri: str
    root_uri: str = ""
    context_type: str = ""
    mode: str = ""
    written_bytes: int = 0
    content_updated: bool = False
    semantic_status: str = ""
    vector_status: str = ""
    overview_status: str = ""
    task_id: str | None = None


class BatchWriteResult(ResultModel):
    """`POST /content/batch-write`: canonical URIs by outcome."""

    root_uri: str = ""
    created: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    semantic_status: str = ""
    vector_status: str = ""
    task_id: str | None = None


class FsEntry(ResultModel):
    uri: str
    size: int = 0
    is_dir: bool = Field(False, alias="isDir")
    mod_time: str = Field("", alias="modTime")
    abstract: str = ""
    rel_path: str | None = None


class FsListing(ResultModel):
    entries: list[FsEntry] = Field(default_factory=list)
    has_more: bool = False


class FsStat(ResultModel):
    uri: str = ""
    name: str = ""
    size: int = 0
    mode: int = 0
    mod_time: str = Field("", alias="modTime")
    is_dir: bool = Field(False, alias="isDir")
    is_locked: bool = Field(False, alias="isLocked")
    id: str = ""


class FsAttrs(ResultModel):
    uri: str = ""
    context_type: str = ""
    tags: list[str] = Field(default_factory=list)
    memory: dict[str, Any] | None = None


class RemoveResult(ResultModel):
    uri: str = ""
    estimated_deleted_count: int = 0
    task_id: str | None = None
