"""Files inside a session archive, read through content/read."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.openviking.models._base import ResultModel


class MemoryAdd(ResultModel):
    uri: str
    memory_type: str = ""
    after: str = ""


class MemoryUpdate(ResultModel):
    uri: str
    memory_type: str = ""
    before: str = ""
    after: str = ""


class MemoryDelete(ResultModel):
    uri: str
    memory_type: str = ""
    deleted_content: str = ""


class MemoryOperations(ResultModel):
    adds: list[MemoryAdd] = Field(default_factory=list)
    updates: list[MemoryUpdate] = Field(default_factory=list)
    deletes: list[MemoryDelete] = Field(default_factory=list)


class MemoryDiff(ResultModel):
    """`<archive>/memory_diff.json`: the only link from an archive to the memories it produced."""

    archive_uri: str = ""
    trace_id: str = ""
    extracted_at: str = ""
    operations: MemoryOperations = MemoryOperations()
    skipped_operations: list[Any] = Field(default_factory=list)
    summary: dict[str, int] = Field(default_factory=dict)

    @property
    def adds(self) -> list[MemoryAdd]:
        return self.operations.adds

    @property
    def updates(self) -> list[MemoryUpdate]:
        return self.operations.updates

    @property
    def deletes(self) -> list[MemoryDelete]:
        return self.operations.deletes


class ArchivePhase1(ResultModel):
    version: int = 0
    status: str = ""
    created_at: str = ""
    ready_at: str = ""
    original_message_ids: list[str] = Field(default_factory=list)
    archived_message_ids: list[str] = Field(default_factory=list)
    retained_message_ids: list[str] = Field(default_factory=list)
    keep_recent_count: int = 0
    retention_mode: str | None = None
    queue_message: dict[str, Any] = Field(default_factory=dict)

    @property
    def task_id(self) -> str | None:
        value = self.queue_message.get("task_id")
        return value if isinstance(value, str) and value else None


class ArchiveMeta(ResultModel):
    """`<archive>/.meta.json`."""

    phase1: ArchivePhase1 = ArchivePhase1()
    completed_memory_steps: dict[str, Any] = Field(default_factory=dict)
    overview_tokens: int | None = None
    abstract_tokens: int | None = None


class ArchiveDone(ResultModel):
    """`<archive>/.done`: phase 2 completed."""

    starting_message_id: str = ""
    ending_message_id: str = ""
    enable_working_memory: bool = False
    coverage_start_archive: str | None = None
    coverage_end_archive: str | None = None
    covered_failed_archives: list[str] = Field(default_factory=list)
    completed_memory_steps: dict[str, Any] = Field(default_factory=dict)


class ArchiveFailure(ResultModel):
    """`<archive>/.failed.json`: phase 2 failed (never retried by OpenViking)."""

    stage: str = ""
    error: str = ""
    failed_at: str = ""
    skipped: bool = False
    blocked_by: str | None = None
    completed_memory_steps: dict[str, Any] = Field(default_factory=dict)
