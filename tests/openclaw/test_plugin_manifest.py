"""The plugin's config schema (openclaw.plugin.json) and the engine's settings agree.

One OpenClaw config block serves both: the plugin validates it against its manifest schema, the
engine loads it from `plugins.entries.<id>.config`. Every key the schema accepts must be one the
engine knows (or ignores on purpose), and the README's block must load in the engine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from contextengine.v1 import common_pb2

from shared.config import _UPSTREAM_IGNORED_KEYS, Settings, load_settings
from tests.openclaw.toolchain import PLUGIN_DIR

MANIFEST = json.loads((PLUGIN_DIR / "openclaw.plugin.json").read_text())
ENGINE_KEYS = {field.alias or name for name, field in Settings.model_fields.items()}


def test_every_key_the_plugin_accepts_is_known_to_the_engine() -> None:
    accepted = set(MANIFEST["configSchema"]["properties"])
    assert accepted - ENGINE_KEYS - _UPSTREAM_IGNORED_KEYS == set()
    assert MANIFEST["configSchema"]["additionalProperties"] is False


def test_each_call_setting_is_a_plugin_key_named_as_in_the_engine_config() -> None:
    """The plugin sends its memory keys as `SettingsOverrides` fields of the same (camelCase) name."""
    accepted = set(MANIFEST["configSchema"]["properties"])
    for field in common_pb2.SettingsOverrides.DESCRIPTOR.fields:
        alias = Settings.model_fields[field.name].alias
        assert alias in accepted and field.camelcase_name == alias, field.name


def test_the_readme_config_block_loads_in_the_engine(tmp_path: Path) -> None:
    readme = (PLUGIN_DIR / "README.md").read_text()
    block = re.search(r"```json5\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    text = re.sub(r"//[^\n]*", "", block[1])
    text = re.sub(r"([{,]\s*)([A-Za-z_][\w-]*)\s*:", r'\1"\2":', text)
    text = re.sub(r",(\s*[}\]])", r"\1", text)
    path = tmp_path / "openclaw.json"
    path.write_text(text)
    config = json.loads(text)["plugins"]["entries"]["viking-context-engine"]["config"]
    settings = load_settings(path, environ={})
    assert (settings.agent_id, settings.recall_limit) == (config["agentId"], config["recallLimit"])
