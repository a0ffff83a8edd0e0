"""Base for typed results: frozen, unknown keys ignored, missing or null keys take defaults."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from shared.errors import BackendError


class ResultModel(BaseModel):
    """A typed view of an OpenViking result; nulls fall back to the field default."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_missing(cls, data: Any) -> Any:
        if isinstance(data, dict) and None in data.values():  # most routes omit null keys already
            return {key: value for key, value in data.items() if value is not None}
        return data


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_result(model: type[ModelT], value: Any, what: str) -> ModelT:
    """Validate `value` as `model` (null as `{}`); a mismatch is a backend error, not a crash."""
    try:
        return model.model_validate({} if value is None else value)
    except ValidationError as exc:
        raise BackendError(
            f"unexpected OpenViking result for {what}: {exc.error_count()} problem(s): "
            f"{exc.errors(include_url=False)[:3]}",
            code="INVALID_RESPONSE",
        ) from exc


def parse_list(model: type[ModelT], value: Any, what: str) -> list[ModelT]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BackendError(f"unexpected OpenViking result for {what}: not a list", code="INVALID_RESPONSE")
    return [parse_result(model, item, what) for item in value]
