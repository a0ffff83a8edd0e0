"""Session results: create/get/list, appends, commit, context and archives."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from shared.openviking.models._base import ResultModel
from shared.openviking.models.parts import MessageKind, Part


class SessionUser(ResultModel):
    account_id: str = ""
    user_id: str = ""


class SessionCreated(ResultModel):
    session_id: str
    uri: str = ""
    user: SessionUser = SessionUser()
    auto_commit_policy: dict[str, Any] | None = None


class SessionInfo(ResultModel):
    """Session meta (`GET /sessions/{id}`); timestamps are ISO strings or ``""``."""

    session_id: str
    uri: str = ""
    user: SessionUser = SessionUser()
    created_at: str = ""
    updated_at: str = ""
    last_message_at: str = ""
    last_commit_at: str = ""
    message_count: int = 0
    """Live (uncommitted or retained) messages."""
    total_message_count: int = 0
    """All messages ever added."""
    pending_tokens: int = 0
    """Estimated tokens the next commit would archive."""
    commit_count: int = 0
    """Archives created so far."""
    keep_recent_count: int = 0
    retention_mode: str | None = None
    memories_extracted: dict[str, int] = Field(default_factory=dict)
    memory_policy: dict[str, Any] = Field(default_factory=dict)
    auto_commit_policy: dict[str, Any] | None = None


class SessionSummary(ResultModel):
    """One row of `GET /sessions`."""

    session_id: str
    uri: str = ""
    mod_time: str = ""


class MessagesAdded(ResultModel):
    session_id: str = ""
    message_count: int = 0
    """Live messages after the write."""
    pending_tokens: int = 0
    added: int = 1
    """Messages added by this call (summed over the requests of a split batch)."""


class CommitResult(ResultModel):
    session_id: str = ""
    status: Literal["accepted", "skipped"]
    task_id: str | None = None
    archive_uri: str | None = None
    archived: bool = False
    reason: str | None = None
    """Why a commit was skipped: `no_messages` or `all_within_keep_window`."""
    effective_enable_working_memory: bool = False
    estimated_active_tokens: int = 0
    budget_exceeded: bool = False
    trace_id: str = ""

    @property
    def archive_id(self) -> str | None:
        """`archive_NNN`, the last path segment of `archive_uri`."""
        return self.archive_uri.rstrip("/").rsplit("/", 1)[-1] if self.archive_uri else None


class SessionMessage(ResultModel):
    """A stored message as returned by context and archives."""

    id: str = ""
    role: str = ""
    parts: list[Part] = Field(default_factory=list)
    created_at: str = ""
    peer_id: str | None = None
    turn_id: str | None = None
    message_kind: MessageKind | None = None
    source_message_ids: list[str] = Field(default_factory=list)


class ContextStats(ResultModel):
    total_archives: int = Field(0, alias="totalArchives")
    included_archives: int = Field(0, alias="includedArchives")
    dropped_archives: int = Field(0, alias="droppedArchives")
    failed_archives: int = Field(0, alias="failedArchives")
    active_tokens: int = Field(0, alias="activeTokens")
    archive_tokens: int = Field(0, alias="archiveTokens")


class SessionContext(ResultModel):
    """`GET /sessions/{id}/context`: newest-first trimmed to the token budget."""

    latest_archive_overview: str = ""
    messages: list[SessionMessage] = Field(default_factory=list)
    estimated_tokens: int = Field(0, alias="estimatedTokens")
    stats: ContextStats = ContextStats()


class SessionArchive(ResultModel):
    """A completed archive (`GET /sessions/{id}/archives/{archive_id}`)."""

    archive_id: str = ""
    abstract: str = ""
    overview: str = ""
    messages: list[SessionMessage] = Field(default_factory=list)
