"""A call's own values of the engine's settings (`SettingsOverrides`): the host plugin's config
keys reach the engine per call instead of being accepted and ignored.

The values are checked by the same rules as the engine's config file (`shared.config.Settings`),
so `recallLimit: 0` is refused the same way whether it comes from the file or from a call.
"""

from __future__ import annotations

from contextengine.v1 import common_pb2
from pydantic import ValidationError

from shared.config import Settings
from shared.errors import InvalidArgument

FIELD = "overrides"
KEPT_VARIANTS = 64
"""Distinct overrides whose settings a service keeps (a host sends the same ones every call)."""


def with_overrides(settings: Settings, overrides: common_pb2.SettingsOverrides) -> Settings:
    """`settings` with the call's values; raise `InvalidArgument` naming the first bad field."""
    values = {field.name: value for field, value in overrides.ListFields()}  # each a Settings field
    if not values:
        return settings
    try:
        return Settings.model_validate({**dict(settings), **values})
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else ""
        raise InvalidArgument(f"{FIELD}.{name}", str(error["msg"]).lower()) from exc


class CallSettings:
    """A service's settings for each call: its own, with the call's overrides. Validating them
    takes ~0.1-0.2 ms, so the result is kept per distinct overrides."""

    def __init__(self, settings: Settings) -> None:
        self._base = settings
        self._variants: dict[bytes, Settings] = {}

    def for_call(self, overrides: common_pb2.SettingsOverrides) -> Settings:
        key = overrides.SerializeToString(deterministic=True)
        if not key:
            return self._base
        found = self._variants.get(key)
        if found is None:
            found = with_overrides(self._base, overrides)
            if len(self._variants) >= KEPT_VARIANTS:
                self._variants.pop(next(iter(self._variants)))
            self._variants[key] = found
        return found
