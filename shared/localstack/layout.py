"""Where the local stack keeps its runtimes, data and logs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STACK_DIR_ENV = "CONTEXT_ENGINE_STACK_DIR"
"""Overrides the directory holding ``venvs/`` and ``data/`` (default ``<repo>/.stack``)."""

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class StackLayout:
    """Paths under one stack directory."""

    stack_dir: Path
    """Holds ``venvs/`` (installed runtimes, reused across runs) and ``data/`` (workspaces, logs)."""

    @classmethod
    def from_env(cls) -> StackLayout:
        override = os.environ.get(STACK_DIR_ENV, "").strip()
        return cls(Path(override).resolve() if override else REPO_ROOT / ".stack")

    @property
    def venvs_dir(self) -> Path:
        return self.stack_dir / "venvs"

    @property
    def openviking_venv(self) -> Path:
        return self.venvs_dir / "openviking"

    @property
    def embeddings_venv(self) -> Path:
        return self.venvs_dir / "embeddings"

    @property
    def data_dir(self) -> Path:
        return self.stack_dir / "data"


@dataclass(frozen=True)
class OpenVikingDataLayout:
    """Files of one OpenViking instance; one server per workspace (OpenViking locks it)."""

    root: Path
    """e.g. ``.stack/data/openviking``."""

    @property
    def config_file(self) -> Path:
        return self.root / "ov.conf"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def home(self) -> Path:
        """``HOME`` of the server process, so nothing leaks into the user's ``~``."""
        return self.root / "home"

    @property
    def server_log(self) -> Path:
        """OpenViking's own log file (``log.output`` in ov.conf)."""
        return self.root / "openviking.log"

    @property
    def stdout_log(self) -> Path:
        """stdout/stderr of the server process."""
        return self.root / "process.log"
