"""The engine's one JSON policy for `JsonValue` fields (tool arguments, tool-result details,
host fields): the text is carried verbatim, and it must be RFC 8259 JSON.

- Accepted: any RFC 8259 JSON text, byte for byte as sent, whatever its numbers (`1E400`,
  `-0`, 400-digit integers), escapes (`\\u2028`, surrogate-pair and lone-surrogate escapes) or
  whitespace. Capture stores the exact text and every read (Compact, ExpandMemory, Assemble)
  returns that exact text.
- Refused with INVALID_ARGUMENT naming the field: text that is not RFC 8259 JSON, including the
  `NaN`, `Infinity` and `-Infinity` literals some encoders emit, and (a size limit) values nested
  deeper than `MAX_DEPTH` arrays/objects.

OpenViking gets a structured *view* of tool arguments for its own summaries and extraction
(`openviking_view`); that view is never read back. Numbers a double cannot hold appear in it as
their literal text, and lone surrogates as U+FFFD.
"""

from __future__ import annotations

import json
import math
from typing import Any

from shared.errors import InvalidArgument

MAX_DEPTH = 128
"""Deepest nesting of arrays and objects a JSON value may have."""
_NOT_JSON_CONSTANTS = ("NaN", "Infinity", "-Infinity")


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)")


def _literal(text: str) -> str:
    return text


def _depth_exceeds(value: object, limit: int) -> bool:
    """True when `value` nests more than `limit` arrays/objects (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: list[object] = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _parse(text: str, *, parse_int: Any, parse_float: Any) -> object:
    """Parse under the policy; raises ValueError with a caller-facing reason."""
    try:
        value = json.loads(
            text, parse_int=parse_int, parse_float=parse_float, parse_constant=_refuse_constant
        )
    except _NotJson:
        raise
    except RecursionError:
        raise ValueError(f"nests deeper than {MAX_DEPTH} arrays/objects") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at position {exc.pos})") from None
    if _depth_exceeds(value, MAX_DEPTH):
        raise ValueError(f"nests deeper than {MAX_DEPTH} arrays/objects")
    return value


def check_json_text(text: str, field: str, *, require_object: bool = False) -> None:
    """Raise InvalidArgument(field) unless `text` is RFC 8259 JSON within the limits.

    Numbers are not converted while checking, so no magnitude or precision is refused.
    """
    try:
        value = _parse(text, parse_int=_literal, parse_float=_literal)
    except ValueError as exc:
        raise InvalidArgument(field, str(exc)) from None
    if require_object and not isinstance(value, dict):
        raise InvalidArgument(field, "must be a JSON object")


def _view_float(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def _view_int(text: str) -> int | str:
    return int(text) if len(text) <= 18 else text


def _plain(value: object) -> object:
    """Strings made encodable (lone surrogates -> U+FFFD), recursively (depth is bounded)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(value) else value
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def openviking_view(text: str) -> dict[str, object]:
    """Checked JSON text as the object OpenViking's `tool_input` takes (non-objects wrapped)."""
    if not text:
        return {}
    try:
        value = _plain(_parse(text, parse_int=_view_int, parse_float=_view_float))
    except ValueError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"value": value}


def loads_or_none(text: str) -> object | None:
    """`text` parsed under the policy, or None when it is not policy JSON (for host text that
    merely might be JSON, such as a tool result's text)."""
    try:
        return _parse(text, parse_int=_literal, parse_float=_literal)
    except ValueError:
        return None
