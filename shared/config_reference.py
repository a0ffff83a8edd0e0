"""docs/config.md, generated from the settings model so that it cannot drift from it.

`python -m shared.config_reference > docs/config.md` writes it; a test fails when the file and
the model disagree (a key, an env var, a default or a meaning).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from shared.config import CONFIG_PATH_ENV, OTHER_ENVIRONMENT, Settings, env_name

HEADER = f"""# Configuration reference

Generated from `shared/config.py` by `python -m shared.config_reference > docs/config.md`; a test
fails when this file is out of date. Do not edit it by hand.

The services read one JSON file (`--config` or `${CONFIG_PATH_ENV}`), bare or as OpenClaw stores
it (`plugins.entries.<id>.config` of the context-engine slot), then the environment: every key
has a variable that overrides it. Every invalid value is reported at once, by name; an unknown
key in the file is refused, an unknown `CONTEXT_ENGINE_*` variable is warned about at startup.
Map keys (`openvikingShards`, `openvikingShardPins`) take `name=value,name=value` in the
environment.
"""


def _default(field: FieldInfo) -> str:
    value: Any = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "none"
    return f"`{json.dumps(value)}`"


def _meaning(field: FieldInfo) -> str:
    return " ".join((field.description or "").split()).replace("|", "\\|")


def render() -> str:
    """The whole of docs/config.md."""
    rows = ["| key | environment variable | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        key = field.alias or name
        rows.append(f"| `{key}` | `{env_name(key)}` | {_default(field)} | {_meaning(field)} |")
    other = ["| environment variable | meaning |", "|---|---|"]
    other += [f"| `{name}` | {meaning} |" for name, meaning in sorted(OTHER_ENVIRONMENT.items())]
    return "\n".join(
        [
            HEADER,
            "## Settings",
            "",
            *rows,
            "",
            "## Other `CONTEXT_ENGINE_*` variables (not settings)",
            "",
            *other,
            "",
            "OpenTelemetry is configured by the standard `OTEL_*` variables only (docs/tracing.md).",
            "",
        ]
    )


if __name__ == "__main__":
    sys.stdout.write(render())
