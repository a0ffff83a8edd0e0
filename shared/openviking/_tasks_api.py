"""Task endpoints and the poll-until-terminal helper."""

from __future__ import annotations

import asyncio
import time

from shared.errors import BackendTimeout
from shared.openviking._base_api import ApiBase, segment
from shared.openviking.models._base import parse_list, parse_result
from shared.openviking.models.tasks import TaskInfo, TaskStatus
from shared.openviking.settings import CallKind
from shared.openviking.tenant import Tenant


class TasksApi(ApiBase):
    async def get_task(self, tenant: Tenant, task_id: str, *, deadline: float | None = None) -> TaskInfo:
        """A task; unknown or expired (24 h after completion) is 404 `BackendNotFound`."""
        envelope = await self._request(
            "GET",
            f"/api/v1/tasks/{segment(task_id)}",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
        )
        return parse_result(TaskInfo, envelope.result, "get task")

    async def list_tasks(
        self,
        tenant: Tenant,
        *,
        resource_id: str | None = None,
        task_type: str | None = None,
        status: TaskStatus | None = None,
        limit: int = 50,
        deadline: float | None = None,
    ) -> list[TaskInfo]:
        """Tasks newest first, e.g. `task_type="session_commit", resource_id=<session id>`."""
        envelope = await self._request(
            "GET",
            "/api/v1/tasks",
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"resource_id": resource_id, "task_type": task_type, "status": status, "limit": limit},
        )
        return parse_list(TaskInfo, envelope.result, "list tasks")

    async def wait_for_task(
        self,
        tenant: Tenant,
        task_id: str,
        deadline: float,
        *,
        poll_interval: float = 0.1,
        max_poll_interval: float = 0.25,
    ) -> TaskInfo:
        """Poll until the task is completed, failed or cancelled; `BackendTimeout` at `deadline`.

        The sleep between polls starts at `poll_interval` and grows by half up to
        `max_poll_interval`. A failed task is returned, not raised: check `status`.
        """
        interval = poll_interval
        while True:
            task = await self.get_task(tenant, task_id, deadline=deadline)
            if task.is_terminal:
                return task
            left = deadline - time.monotonic()
            if left <= interval:
                raise BackendTimeout(
                    f"task {task_id} still {task.status} at the deadline", code="DEADLINE_EXCEEDED"
                )
            await asyncio.sleep(interval)
            interval = min(max_poll_interval, interval * 1.5)
