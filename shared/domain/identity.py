"""Who a request is for: validated once at the edge, then passed around as plain data.

The engine's one identity/ID policy (every violation is INVALID_ARGUMENT naming the field):
- `account_id` and `user_id` are required (no process-wide identity is assumed) and follow
  OpenViking's identifier rules: `[A-Za-z0-9_.@-]{1,255}`, at most one `@`, not `.` or `..`;
  an account id must not start with `_` (OpenViking reserves those).
- `agent_id` follows the same rules; empty means the configured `agentId`.
- `session_id` is `[A-Za-z0-9_.@:-]{1,255}` and not made of dots only.
- Free-form ids (`session_key`, message and tool-call ids) and URIs may hold any Unicode except
  control characters (U+0000-U+001F, U+007F-U+009F), and are length-bounded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from contextengine.v1 import common_pb2

from shared.config import Settings
from shared.errors import InvalidArgument
from shared.openviking.tenant import Tenant

_IDENTIFIER = re.compile(r"^[A-Za-z0-9_.@-]{1,255}$")
_SESSION_ID = re.compile(r"^[A-Za-z0-9_.@:-]{1,255}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_SESSION_KEY_CHARS = 512


def check_free_text_id(value: str, field: str, *, max_chars: int) -> str:
    """A free-form id or URI: bounded, no control characters (NUL included)."""
    if len(value) > max_chars:
        raise InvalidArgument(field, f"is longer than {max_chars} characters")
    if _CONTROL.search(value):
        raise InvalidArgument(field, "must not contain control characters (U+0000-U+001F, U+007F-U+009F)")
    return value


def _check_identifier(value: str, field: str, *, required: bool = True) -> str:
    if not value:
        if required:
            raise InvalidArgument(field, "is required")
        return value
    if not _IDENTIFIER.match(value) or value.count("@") > 1 or value in (".", ".."):
        raise InvalidArgument(field, "must match [A-Za-z0-9_.@-]{1,255} with at most one '@'")
    return value


@dataclass(frozen=True)
class RequestIdentity:
    tenant: Tenant
    agent_id: str
    session_id: str
    session_key: str

    @property
    def buffer_key(self) -> str:
        """The engine's key for one conversation stream: host session and agent (docs/design.md §3.2)."""
        return f"{self.session_id}:{self.agent_id}"

    @property
    def stream_id(self) -> str:
        """A short stable id for the buffer key, safe as part of OpenViking ids and URIs."""
        return hashlib.sha256(self.buffer_key.encode()).hexdigest()[:20]


def parse_identity(
    identity: common_pb2.Identity,
    *,
    default_agent_id: str,
    session_required: bool,
    field: str = "identity",
) -> RequestIdentity:
    """Validate the request identity; errors name the offending field."""
    user_id = _check_identifier(identity.user_id, f"{field}.user_id")
    account_id = _check_identifier(identity.account_id, f"{field}.account_id")
    if account_id.startswith("_"):
        raise InvalidArgument(f"{field}.account_id", "must not start with '_'")
    agent_id = _check_identifier(identity.agent_id or default_agent_id, f"{field}.agent_id")
    session_id = identity.session_id
    if session_required and not session_id:
        raise InvalidArgument(f"{field}.session_id", "is required")
    if session_id and (not _SESSION_ID.match(session_id) or not session_id.strip(".")):
        raise InvalidArgument(
            f"{field}.session_id", "must match [A-Za-z0-9_.@:-]{1,255} and not be only dots"
        )
    check_free_text_id(identity.session_key, f"{field}.session_key", max_chars=MAX_SESSION_KEY_CHARS)
    return RequestIdentity(Tenant(account_id, user_id), agent_id, session_id, identity.session_key)


def request_identity(
    identity: common_pb2.Identity, settings: Settings, *, session_required: bool
) -> RequestIdentity:
    """`parse_identity` with the configured default agent."""
    return parse_identity(identity, default_agent_id=settings.agent_id, session_required=session_required)
