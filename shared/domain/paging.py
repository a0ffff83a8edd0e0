"""Opaque page tokens for list-shaped responses (an offset into a stable order)."""

from __future__ import annotations

from shared.errors import InvalidArgument

_PREFIX = "o"


def page_token(offset: int) -> str:
    return f"{_PREFIX}{offset}"


def page_offset(token: str, field: str = "page_token") -> int:
    """The offset a token stands for (0 for none); a token not issued by the engine is refused."""
    if not token:
        return 0
    digits = token[len(_PREFIX) :]
    if not token.startswith(_PREFIX) or not digits.isascii() or not digits.isdigit() or len(digits) > 9:
        raise InvalidArgument(field, "is not a token from a previous response")
    return int(digits)
