"""Background task status (`/api/v1/tasks`)."""

from __future__ import annotations

from typing import Any, Literal

from shared.openviking.models._base import ResultModel

TaskStatus = Literal["pending", "running", "cancelling", "completed", "failed", "cancelled"]
TERMINAL_TASK_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class TaskInfo(ResultModel):
    task_id: str
    task_type: str = ""
    status: TaskStatus
    created_at: float = 0.0
    updated_at: float = 0.0
    processing_seconds: float = 0.0
    resource_id: str = ""
    """The session id for commits, the URI for content writes."""
    stage: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_TASK_STATUSES

    @property
    def memory_diff_uri(self) -> str | None:
        """Set on a completed commit task when long-term extraction ran."""
        value = (self.result or {}).get("memory_diff_uri")
        return value if isinstance(value, str) and value else None

    @property
    def archive_uri(self) -> str | None:
        value = (self.result or {}).get("archive_uri")
        return value if isinstance(value, str) and value else None
