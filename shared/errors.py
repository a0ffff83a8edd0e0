"""One exception root for the engine; every class knows the gRPC status it maps to.

Servicers raise these; the error interceptor in `shared.runtime.interceptors` turns them into
gRPC statuses with the message only (never a stack trace). Backend (OpenViking) failures are
mapped faithfully from the HTTP status by `backend_error_for_status`.
"""

from __future__ import annotations

import grpc


class ContextEngineError(Exception):
    """Root of every error the engine reports to a caller."""

    status_code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(ContextEngineError):
    """A request field is malformed; `field` names it (dotted path, e.g. `messages[3].role`)."""

    status_code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class NotFound(ContextEngineError):
    status_code = grpc.StatusCode.NOT_FOUND


class PermissionDenied(ContextEngineError):
    status_code = grpc.StatusCode.PERMISSION_DENIED


class FailedPrecondition(ContextEngineError):
    status_code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(ContextEngineError):
    """A concurrent writer won; the caller may retry."""

    status_code = grpc.StatusCode.ABORTED


class ConfigurationError(ContextEngineError):
    """Settings are invalid; `problems` lists every bad value by name."""

    status_code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


class BackendError(ContextEngineError):
    """OpenViking answered with an error or could not be reached.

    `http_status` is the HTTP status (0 when no response arrived) and `code` OpenViking's own
    error code (e.g. `NOT_FOUND`, `UNAVAILABLE`).
    """

    status_code = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, *, http_status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.http_status = http_status
        self.code = code


class BackendUnavailable(BackendError):
    """Connection refused/reset, or a 5xx that means "try again" (retriable)."""

    status_code = grpc.StatusCode.UNAVAILABLE


class BackendTimeout(BackendError):
    status_code = grpc.StatusCode.DEADLINE_EXCEEDED


class BackendInvalidArgument(BackendError):
    status_code = grpc.StatusCode.INVALID_ARGUMENT


class BackendNotFound(BackendError):
    status_code = grpc.StatusCode.NOT_FOUND


class BackendPermissionDenied(BackendError):
    status_code = grpc.StatusCode.PERMISSION_DENIED


class BackendUnauthenticated(BackendError):
    status_code = grpc.StatusCode.UNAUTHENTICATED


class BackendConflict(BackendError):
    status_code = grpc.StatusCode.ALREADY_EXISTS


class BackendFailedPrecondition(BackendError):
    status_code = grpc.StatusCode.FAILED_PRECONDITION


class BackendResourceExhausted(BackendError):
    status_code = grpc.StatusCode.RESOURCE_EXHAUSTED


_BY_HTTP_STATUS: dict[int, type[BackendError]] = {
    400: BackendInvalidArgument,
    401: BackendUnauthenticated,
    403: BackendPermissionDenied,
    404: BackendNotFound,
    409: BackendConflict,
    410: BackendFailedPrecondition,
    412: BackendFailedPrecondition,
    429: BackendResourceExhausted,
    504: BackendTimeout,
}


def backend_error_for_status(http_status: int, message: str, code: str = "") -> BackendError:
    """The engine error for an OpenViking HTTP error response (the status is kept on the error)."""
    if http_status in _BY_HTTP_STATUS:
        cls = _BY_HTTP_STATUS[http_status]
    elif http_status in (502, 503) or (http_status >= 500 and code == "UNAVAILABLE"):
        cls = BackendUnavailable
    elif http_status >= 500:
        # 500 from OpenViking is an internal failure of the backend: the request may succeed later.
        cls = BackendUnavailable
    else:
        cls = BackendError
    return cls(message, http_status=http_status, code=code)
