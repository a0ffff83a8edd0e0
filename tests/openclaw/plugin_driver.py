"""The built plugin's context engine driven from a test (`plugin_driver.mjs`), with the real
engine behind it: turns with OpenClaw's own call shapes, without the 650 MB host."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from tests.openclaw.toolchain import build_plugin

DRIVER = Path(__file__).with_name("plugin_driver.mjs")
DRIVER_SECONDS = 120.0

Call = dict[str, Any]
Turn = list[Call] | tuple[dict[str, Any], list[Call]]
"""A turn's calls, or (the plugin config for this turn, its calls)."""


def call(method: str, **params: Any) -> Call:
    return {"method": method, "params": params}


async def drive(config: dict[str, Any], turns: list[Turn]) -> list[Any]:
    """Run `turns` (each its calls, or (config override, calls)) through the plugin, one engine
    per turn; each call's result (`{"value": ...}` or `{"error": message}`), in order."""
    build_plugin()
    node = shutil.which("node")
    assert node, "node is needed to run the plugin"
    script = {
        "config": config,
        "turns": [{"config": t[0], "calls": t[1]} if isinstance(t, tuple) else {"calls": t} for t in turns],
    }
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(json.dumps(script).encode()), DRIVER_SECONDS)
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    results = json.loads(out)
    assert isinstance(results, list)
    return results
