"""Session endpoints: create/get/list/delete, append, commit, context, archives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from shared.openviking._base_api import ApiBase, segment
from shared.openviking.models._base import parse_list, parse_result
from shared.openviking.models.parts import NewMessage
from shared.openviking.models.sessions import (
    CommitResult,
    MessagesAdded,
    SessionArchive,
    SessionContext,
    SessionCreated,
    SessionInfo,
    SessionSummary,
)
from shared.openviking.settings import CallKind
from shared.openviking.tenant import Tenant

MAX_BATCH_MESSAGES = 100
"""OpenViking rejects a batch of more than 100 messages."""

_UNSET: Any = object()


def _session_path(session_id: str, suffix: str = "") -> str:
    return f"/api/v1/sessions/{segment(session_id)}{suffix}"


class SessionsApi(ApiBase):
    async def create_session(
        self,
        tenant: Tenant,
        session_id: str | None = None,
        *,
        memory_policy: Mapping[str, Any] | None = None,
        auto_commit_policy: Mapping[str, Any] | None = _UNSET,
        memory_extraction_config: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> SessionCreated:
        """Create a session (409 `BackendConflict` if `session_id` exists).

        `auto_commit_policy=None` sends an explicit null (no auto-commit); leaving it out uses
        the server default.
        """
        body: dict[str, Any] = {}
        if session_id is not None:
            body["session_id"] = session_id
        if memory_policy is not None:
            body["memory_policy"] = dict(memory_policy)
        if auto_commit_policy is not _UNSET:
            body["auto_commit_policy"] = None if auto_commit_policy is None else dict(auto_commit_policy)
        if memory_extraction_config is not None:
            body["memory_extraction_config"] = dict(memory_extraction_config)
        envelope = await self._request(
            "POST",
            "/api/v1/sessions",
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=False,
            deadline=deadline,
            json=body,
        )
        return parse_result(SessionCreated, envelope.result, "create session")

    async def get_session(
        self, tenant: Tenant, session_id: str, *, auto_create: bool = False, deadline: float | None = None
    ) -> SessionInfo:
        envelope = await self._request(
            "GET",
            _session_path(session_id),
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"auto_create": auto_create},
        )
        return parse_result(SessionInfo, envelope.result, "get session")

    async def list_sessions(self, tenant: Tenant, *, deadline: float | None = None) -> list[SessionSummary]:
        envelope = await self._request(
            "GET", "/api/v1/sessions", tenant=tenant, kind=CallKind.READ, idempotent=True, deadline=deadline
        )
        return parse_list(SessionSummary, envelope.result, "list sessions")

    async def delete_session(self, tenant: Tenant, session_id: str, *, deadline: float | None = None) -> None:
        """Delete the session with its archives (extracted memories stay)."""
        await self._request(
            "DELETE",
            _session_path(session_id),
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=True,
            deadline=deadline,
        )

    async def update_session_config(
        self,
        tenant: Tenant,
        session_id: str,
        *,
        auto_commit_policy: Mapping[str, Any] | None = _UNSET,
        memory_extraction_config: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> None:
        body: dict[str, Any] = {}
        if auto_commit_policy is not _UNSET:
            body["auto_commit_policy"] = None if auto_commit_policy is None else dict(auto_commit_policy)
        if memory_extraction_config is not None:
            body["memory_extraction_config"] = dict(memory_extraction_config)
        await self._request(
            "PATCH",
            _session_path(session_id, "/config"),
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=True,
            deadline=deadline,
            json=body,
        )

    async def add_message(
        self, tenant: Tenant, session_id: str, message: NewMessage, *, deadline: float | None = None
    ) -> MessagesAdded:
        """Append one message (creates the session if missing). Never retried."""
        envelope = await self._request(
            "POST",
            _session_path(session_id, "/messages"),
            tenant=tenant,
            kind=CallKind.APPEND,
            idempotent=False,
            deadline=deadline,
            json=message.to_body(),
        )
        return parse_result(MessagesAdded, envelope.result, "add message")

    async def add_messages(
        self,
        tenant: Tenant,
        session_id: str,
        messages: Sequence[NewMessage],
        *,
        deadline: float | None = None,
        call_timeout: float | None = None,
    ) -> MessagesAdded:
        """Append messages in order, ≤100 per request; each request is atomic, the whole is not.

        Never retried; `call_timeout` (per request) replaces the append default. The result
        carries the totals of all requests (`added`) and the counts after the last one.
        """
        result = MessagesAdded(session_id=session_id, added=0)
        added = 0
        for start in range(0, len(messages), MAX_BATCH_MESSAGES):
            chunk = messages[start : start + MAX_BATCH_MESSAGES]
            envelope = await self._request(
                "POST",
                _session_path(session_id, "/messages/batch"),
                tenant=tenant,
                kind=CallKind.APPEND,
                idempotent=False,
                deadline=deadline,
                json={"messages": [message.to_body() for message in chunk]},
                call_timeout=call_timeout,
            )
            result = parse_result(MessagesAdded, envelope.result, "batch add messages")
            added += result.added
        return result.model_copy(update={"added": added})

    async def commit_session(
        self,
        tenant: Tenant,
        session_id: str,
        *,
        keep_recent_count: int | None = None,
        retention_mode: Literal["turn_budget"] | None = None,
        keep_recent_turn_count: int | None = None,
        retained_message_token_budget: int | None = None,
        min_raw_tail_steps: int | None = None,
        enable_working_memory: bool | None = None,
        reset_context: bool | None = None,
        extraction_metadata: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> CommitResult:
        """Archive the session's messages (phase 1); poll the task for phase 2. Never retried."""
        fields: dict[str, Any] = {
            "keep_recent_count": keep_recent_count,
            "retention_mode": retention_mode,
            "keep_recent_turn_count": keep_recent_turn_count,
            "retained_message_token_budget": retained_message_token_budget,
            "min_raw_tail_steps": min_raw_tail_steps,
            "enable_working_memory": enable_working_memory,
            "reset_context": reset_context,
            "extraction_metadata": dict(extraction_metadata) if extraction_metadata is not None else None,
        }
        body = {key: value for key, value in fields.items() if value is not None}
        envelope = await self._request(
            "POST",
            _session_path(session_id, "/commit"),
            tenant=tenant,
            kind=CallKind.COMMIT,
            idempotent=False,
            deadline=deadline,
            json=body,
        )
        return parse_result(CommitResult, envelope.result, "commit session")

    async def get_session_context(
        self,
        tenant: Tenant,
        session_id: str,
        *,
        token_budget: int = 128_000,
        deadline: float | None = None,
    ) -> SessionContext:
        envelope = await self._request(
            "GET",
            _session_path(session_id, "/context"),
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
            params={"token_budget": token_budget},
        )
        return parse_result(SessionContext, envelope.result, "session context")

    async def get_session_archive(
        self, tenant: Tenant, session_id: str, archive_id: str, *, deadline: float | None = None
    ) -> SessionArchive:
        """A completed archive; pending/failed/unknown archives are 404 `BackendNotFound`."""
        envelope = await self._request(
            "GET",
            _session_path(session_id, f"/archives/{segment(archive_id)}"),
            tenant=tenant,
            kind=CallKind.READ,
            idempotent=True,
            deadline=deadline,
        )
        return parse_result(SessionArchive, envelope.result, "session archive")
