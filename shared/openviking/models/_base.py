"""Base for typed results: frozen, unknown keys ignored, missing or null keys take defaults."""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from shared.errors import BackendError


class ResultModel(BaseModel):
    """A typed view of an OpenViking result; nulls fall back to the field default (`parse_result`)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


ModelT = TypeVar("ModelT", bound=BaseModel)


def without_nulls(value: Any) -> Any:
    """`value` with every null-valued key of every nested object left out (so it takes its default)."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def parse_result(model: type[ModelT], value: Any, what: str) -> ModelT:
    """Validate `value` as `model` (null as `{}`, null keys as missing); a mismatch is a backend
    error, not a crash. Validation runs in pydantic's core; only a result that fails it is walked
    again in Python, with its nulls left out (most routes omit null keys already)."""
    try:
        return model.model_validate({} if value is None else value)
    except ValidationError:
        pass
    try:
        return model.model_validate(without_nulls(value))
    except ValidationError as exc:
        raise BackendError(
            f"unexpected OpenViking result for {what}: {exc.error_count()} problem(s): "
            f"{exc.errors(include_url=False)[:3]}",
            code="INVALID_RESPONSE",
        ) from exc


@cache
def result_envelope(model: type[BaseModel]) -> type[BaseModel]:
    """A model of the whole response envelope around `model` (`{status, result}`), for decoding
    and validating a success in one pass over its bytes (`shared.openviking.envelope.unwrap_as`)."""
    result: Any = (model | None, None)  # a type built at runtime (mypy cannot check it)
    return create_model(
        f"{model.__name__}Envelope",
        __config__=ConfigDict(frozen=True, extra="ignore"),
        status=(str, "ok"),
        result=result,
    )


def parse_list(model: type[ModelT], value: Any, what: str) -> list[ModelT]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BackendError(f"unexpected OpenViking result for {what}: not a list", code="INVALID_RESPONSE")
    return [parse_result(model, item, what) for item in value]
