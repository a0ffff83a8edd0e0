"""Settings: the upstream plugin's config file starts the engine; bad values are named at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.config import load_settings
from shared.errors import ConfigurationError

# A config block as the upstream OpenClaw plugin stored it (openclaw.json), including keys the
# engine accepts but no longer uses.
UPSTREAM_PLUGIN_CONFIG = {
    "plugins": {
        "slots": {"contextEngine": "openviking"},
        "entries": {
            "openviking": {
                "enabled": True,
                "config": {
                    "mode": "remote",
                    "baseUrl": "http://openviking.internal:1933",
                    "apiKey": "sk-upstream",
                    "agentId": "coder",
                    "timeoutMs": 20000,
                    "autoRecall": True,
                    "autoCapture": False,
                    "recallLimit": 8,
                    "recallScoreThreshold": 0.2,
                    "recallMaxContentChars": 400,
                    "recallPreferAbstract": False,
                    "recallTokenBudget": 1500,
                    "captureMode": "semantic",
                    "captureMaxLength": 20000,
                    "targetUri": "viking://user/memories",
                    "commitTokenThreshold": 20000,
                },
            }
        },
    }
}


def test_upstream_plugin_config_file_starts(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps(UPSTREAM_PLUGIN_CONFIG))
    settings = load_settings(path, environ={})
    assert settings.mode == "remote"
    assert settings.base_url == "http://openviking.internal:1933"
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "sk-upstream"
    assert (settings.agent_id, settings.recall_limit, settings.auto_capture) == ("coder", 8, False)
    assert settings.recall_prefer_abstract is False
    # New keys (docs/design.md §7.2) take their suggested defaults.
    assert (settings.recent_raw_turn_count, settings.assemble_recall_window) == (8, 5)
    assert (settings.compact_commit_threshold, settings.memory_expand_max_results) == (0.75, 6)


def test_every_invalid_value_is_reported_by_name(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {"recallLimit": 0, "compactCommitThreshold": 1.5, "mode": "cloud", "recentRawTurnCount": "x"}
        )
    )
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, environ={"CONTEXT_ENGINE_BASE_URL": "not a url"})
    named = {problem.split(":", 1)[0] for problem in caught.value.problems}
    assert named == {"recallLimit", "compactCommitThreshold", "mode", "recentRawTurnCount", "baseUrl"}


def test_unknown_key_is_an_error_but_upstream_keys_are_not() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ={}, overrides={"recalLimit": 3, "captureMode": "semantic"})
    assert caught.value.problems == ["recalLimit: unknown setting"]


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"recallLimit": 3, "autoRecall": True}))
    settings = load_settings(
        path, environ={"CONTEXT_ENGINE_RECALL_LIMIT": "9", "CONTEXT_ENGINE_AUTO_RECALL": "false"}
    )
    assert (settings.recall_limit, settings.auto_recall) == (9, False)


def test_root_key_modes_require_a_key() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ={}, overrides={"openvikingAuthMode": "trusted"})
    assert "apiKey is required" in caught.value.message


OTHER_PLUGIN_FIRST = {
    "plugins": {
        "entries": {
            "lossless-claw": {"enabled": True, "config": {"provider": "sqlite", "dbPath": "/tmp/x.db"}},
            "viking-engine": {"enabled": True, "config": {"recallLimit": 4}},
        },
        "slots": {"contextEngine": "viking-engine", "memory": "none"},
    }
}


def test_the_entry_the_context_engine_slot_names_is_read_not_the_first(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps(OTHER_PLUGIN_FIRST))
    assert load_settings(path, environ={}).recall_limit == 4


def test_without_a_slot_the_engine_plugin_id_is_read(tmp_path: Path) -> None:
    config = {
        "plugins": {
            "entries": {
                "lossless-claw": {"config": {"provider": "sqlite"}},
                "openviking": {"config": {"recallLimit": 5}},
            }
        }
    }
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps(config))
    assert load_settings(path, environ={}).recall_limit == 5


def test_an_entry_without_config_means_defaults_and_a_dangling_slot_is_named(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps({"plugins": {"slots": {"contextEngine": "openviking"},
                                            "entries": {"openviking": {"enabled": True}}}}))  # fmt: skip
    assert load_settings(path, environ={}).recall_limit == 6
    path.write_text(json.dumps({"plugins": {"slots": {"contextEngine": "gone"}, "entries": {}}}))
    with pytest.raises(ConfigurationError) as caught:
        load_settings(path, environ={})
    assert caught.value.problems[0].startswith("plugins.slots.contextEngine:")
