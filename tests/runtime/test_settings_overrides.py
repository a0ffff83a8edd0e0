"""A call's settings (`SettingsOverrides`): every field is a setting, checked like the config file."""

from __future__ import annotations

import pytest
from contextengine.v1 import common_pb2
from hypothesis import given
from hypothesis import strategies as st

from shared.config import Settings
from shared.errors import InvalidArgument
from shared.settings_overrides import KEPT_VARIANTS, CallSettings, with_overrides

BASE = Settings()


def test_every_override_names_a_setting() -> None:
    for field in common_pb2.SettingsOverrides.DESCRIPTOR.fields:
        assert field.name in Settings.model_fields, field.name


def test_nothing_set_is_the_engine_own_settings() -> None:
    assert with_overrides(BASE, common_pb2.SettingsOverrides()) is BASE


@given(st.integers(-5, 120), st.booleans(), st.floats(-1, 2, allow_nan=False))
def test_values_in_range_are_taken_and_others_refused_naming_the_field(
    limit: int, auto_recall: bool, threshold: float
) -> None:
    overrides = common_pb2.SettingsOverrides(
        recall_limit=limit, auto_recall=auto_recall, recall_score_threshold=threshold
    )
    if not 1 <= limit <= 100 or not 0 <= threshold <= 1:
        with pytest.raises(InvalidArgument) as caught:
            with_overrides(BASE, overrides)
        assert caught.value.field in ("overrides.recall_limit", "overrides.recall_score_threshold")
        return
    settings = with_overrides(BASE, overrides)
    assert (settings.recall_limit, settings.auto_recall) == (limit, auto_recall)
    assert settings.recall_score_threshold == pytest.approx(threshold)
    assert settings.recent_raw_turn_count == BASE.recent_raw_turn_count


def test_a_service_keeps_the_settings_of_overrides_it_has_seen() -> None:
    calls = CallSettings(BASE)
    assert calls.for_call(common_pb2.SettingsOverrides()) is BASE
    first = calls.for_call(common_pb2.SettingsOverrides(recall_limit=2))
    assert first.recall_limit == 2 and calls.for_call(common_pb2.SettingsOverrides(recall_limit=2)) is first
    for limit in range(1, KEPT_VARIANTS + 10):  # bounded: the oldest are dropped
        assert calls.for_call(common_pb2.SettingsOverrides(recall_limit=limit)).recall_limit == limit
    with pytest.raises(InvalidArgument):
        calls.for_call(common_pb2.SettingsOverrides(recall_limit=0))
