"""docs/config.md is the settings model's reference, and misspelt CONTEXT_ENGINE_* names are warned."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.config import (
    ENV_PREFIX,
    OTHER_ENVIRONMENT,
    Settings,
    env_name,
    load_settings,
    unknown_environment,
)
from shared.config_reference import render

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "config.md"


def test_docs_config_md_is_the_generated_reference() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render(), (
        "docs/config.md is out of date: python -m shared.config_reference > docs/config.md"
    )


def test_every_setting_has_a_row_with_its_key_env_var_and_meaning() -> None:
    rows = {
        match[0]: (match[1], match[3])
        for match in re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| ([^|]+) \| (.+) \|$", render(), re.M)
    }
    for name, field in Settings.model_fields.items():
        key = field.alias or name
        assert key in rows, f"{key}: no row in the reference"
        variable, meaning = rows[key]
        assert variable == env_name(key)
        assert meaning.strip(), f"{key}: no meaning (give the field a docstring)"


def test_every_context_engine_variable_the_code_reads_is_known() -> None:
    """A CONTEXT_ENGINE_* name the code reads that is neither a setting nor listed would be warned
    about as a typo, and missing from the reference (tests' deliberate typos are not read)."""
    known = {env_name(f.alias or n) for n, f in Settings.model_fields.items()} | set(OTHER_ENVIRONMENT)
    named: set[str] = set()
    readers = [REPO / "tests" / "conftest.py", *(REPO / "tests" / "support").rglob("*.py")]
    for folder in ("shared", "services", "examples", "clients"):
        readers += (REPO / folder).rglob("*.py")
    for path in readers:
        named |= set(re.findall(r"\bCONTEXT_ENGINE_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text("utf-8")))
    assert named - known == set()


def test_a_misspelt_variable_is_warned_with_the_name_meant(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="contextengine.config"):
        settings = load_settings(
            environ={"CONTEXT_ENGINE_RECAL_LIMIT": "9", "CONTEXT_ENGINE_RECALL_LIMIT": "7"}
        )
    assert settings.recall_limit == 7
    assert caplog.messages == [
        "CONTEXT_ENGINE_RECAL_LIMIT: not a context-engine setting, ignored "
        "(did you mean CONTEXT_ENGINE_RECALL_LIMIT?)"
    ]


def test_known_variables_and_other_programs_variables_are_not_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {name: "x" for name in OTHER_ENVIRONMENT if name != "CONTEXT_ENGINE_CONFIG"}
    environ |= {"CONTEXT_ENGINE_GRPC_PORT": "0", "HOME": "/nowhere", "OTEL_SERVICE_NAME": "x"}
    with caplog.at_level(logging.WARNING, logger="contextengine.config"):
        load_settings(environ=environ)
    assert caplog.messages == []


@given(st.from_regex(r"[A-Z][A-Z0-9_]{0,30}", fullmatch=True))
def test_any_unknown_name_is_warned_exactly_once(suffix: str) -> None:
    name = ENV_PREFIX + suffix
    known = {env_name(f.alias or n) for n, f in Settings.model_fields.items()} | set(OTHER_ENVIRONMENT)
    lines = unknown_environment({name: "1"})
    assert len(lines) == (0 if name in known else 1)
    if lines:
        assert lines[0].startswith(f"{name}: not a context-engine setting, ignored")
