"""Who a call acts for: identity is per call, never process-wide."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.errors import InvalidArgument

_IDENTIFIER = re.compile(r"[A-Za-z0-9_.@-]{1,255}")


def _check_identifier(field: str, value: str) -> None:
    if not _IDENTIFIER.fullmatch(value) or value in (".", "..") or value.count("@") > 1:
        raise InvalidArgument(field, "must be 1-255 of [A-Za-z0-9_.@-], at most one '@', not '.' or '..'")


@dataclass(frozen=True, slots=True)
class Tenant:
    """The OpenViking account and user a call is made as."""

    account_id: str
    """OpenViking account (must not start with `_`)."""
    user_id: str
    """OpenViking user inside the account; sessions and `viking://~/...` belong to it."""

    def __post_init__(self) -> None:
        _check_identifier("tenant.account_id", self.account_id)
        _check_identifier("tenant.user_id", self.user_id)
        if self.account_id.startswith("_"):
            raise InvalidArgument("tenant.account_id", "must not start with '_'")
