"""Health, readiness and caller identity."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from shared.openviking.models._base import ResultModel


class Health(ResultModel):
    """`GET /health` (not enveloped)."""

    status: str = ""
    healthy: bool = False
    version: str = ""
    auth_mode: str = ""
    account_id: str | None = None
    user_id: str | None = None
    role: str | None = None


class Readiness(ResultModel):
    """`GET /ready`; 503 while initializing is a result here, not an error."""

    status: str = ""
    reason: str | None = None
    checks: dict[str, Any] = Field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return self.status == "ready"


class SystemStatus(ResultModel):
    initialized: bool = False
    user: str = ""
