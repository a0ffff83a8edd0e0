"""OpenViking's response envelope and error bodies, turned into results or engine errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shared.errors import BackendError, backend_error_for_status
from shared.openviking.http import HttpResponse
from shared.openviking.models._base import parse_result, result_envelope

ModelT = TypeVar("ModelT", bound=BaseModel)

# OpenViking error code -> HTTP status (server models.py), used when a 2xx body says "error".
_STATUS_BY_CODE: dict[str, int] = {
    "INVALID_ARGUMENT": 400,
    "INVALID_URI": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "CONFLICT": 409,
    "ABORTED": 409,
    "SESSION_EXPIRED": 410,
    "FAILED_PRECONDITION": 412,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}
_MAX_TEXT_IN_MESSAGE = 300


@dataclass(frozen=True, slots=True)
class Envelope:
    """A successful response: `result` plus the top-level extras some routes add."""

    result: Any
    """The `result` value (None when the key was missing); the whole body for bare routes."""
    has_more: bool = False
    """`fs/ls` and `fs/tree` pagination flag."""
    telemetry: Any = None
    """Present only when the request asked for `"telemetry": true`."""


def _decode(response: HttpResponse) -> Any:
    if not response.body:
        return None
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _NOT_JSON


_NOT_JSON = object()


def error_from_response(response: HttpResponse, body: Any = None, *, decoded: bool = False) -> BackendError:
    """The engine error for an error response, keeping HTTP status and OpenViking's code/message."""
    if not decoded:
        body = _decode(response)
    code = ""
    message = ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            message = str(error.get("message") or "")
        elif isinstance(body.get("detail"), str):  # a bare framework error
            message = body["detail"]
    if not message:
        text = response.text.strip() if body is _NOT_JSON or not isinstance(body, dict) else ""
        reason = response.reason or "error"
        message = f"HTTP {response.status} {reason}" + (f": {text[:_MAX_TEXT_IN_MESSAGE]}" if text else "")
    status = response.status
    if status < 400:
        status = _STATUS_BY_CODE.get(code, 500)
    return backend_error_for_status(status, message, code)


def unwrap(response: HttpResponse, *, enveloped: bool) -> Envelope:
    """The successful result of `response`, or raise the mapped `BackendError`."""
    body = _decode(response)
    is_error_body = isinstance(body, dict) and body.get("status") == "error"
    if response.status >= 400 or (enveloped and is_error_body):
        raise error_from_response(response, body, decoded=True)
    if body is _NOT_JSON:
        raise BackendError(
            f"OpenViking answered HTTP {response.status} with a non-JSON body",
            http_status=response.status,
            code="INVALID_RESPONSE",
        )
    if not enveloped:
        return Envelope(result=body)
    if not isinstance(body, dict):
        raise BackendError(
            f"OpenViking answered HTTP {response.status} without a response envelope",
            http_status=response.status,
            code="INVALID_RESPONSE",
        )
    return Envelope(
        result=body.get("result"),
        has_more=bool(body.get("has_more") or False),
        telemetry=body.get("telemetry"),
    )


def unwrap_as(response: HttpResponse, model: type[ModelT], what: str) -> ModelT:
    """`unwrap` and `parse_result` in one: a plain success is decoded and validated in one pass
    over its bytes (pydantic's core, no intermediate Python objects); anything else (an error,
    a result with nulls, a mismatch) takes the general path."""
    if response.status < 400:
        try:
            envelope = result_envelope(model).model_validate_json(response.body)
        except ValidationError:
            pass
        else:
            result = getattr(envelope, "result", None)
            if getattr(envelope, "status", "") != "error" and isinstance(result, model):
                return result
    return parse_result(model, unwrap(response, enveloped=True).result, what)
