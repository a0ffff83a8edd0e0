"""Provision the two private virtualenvs (OpenViking, embedding server); idempotent."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from shared.localstack.errors import ProvisioningError
from shared.localstack.layout import StackLayout
from shared.localstack.pins import (
    EMBEDDINGS_REQUIREMENTS,
    MODEL_PACKAGE,
    ONNX_EMBEDDINGS_REQUIREMENTS,
    ONNX_WEIGHTS_REQUIREMENT,
    OPENVIKING_REQUIREMENTS,
    TORCH_REQUIREMENT,
)
from shared.localstack.progress import Reporter, print_progress

MARKER_NAME = ".context-engine-runtime.json"
INSTALL_TIME_NAME = ".context-engine-install-seconds"
BUILD_DIR = "build"
"""Where a runtime's build script writes (``<venv>/build``)."""
HEARTBEAT_SECONDS = 15.0


@dataclass(frozen=True)
class RuntimeSpec:
    """One private venv: its name and the pip installs that build it, in order."""

    name: str
    install_steps: tuple[tuple[str, ...], ...]
    """Each step is one ``pip install`` invocation (torch must come before infinity-emb)."""
    build_script: str | None = None
    """A script next to this module that the venv's Python runs after the installs, with
    ``<venv>/build`` as its argument (``-P``: the script's folder is not on its import path)."""

    def marker_text(self) -> str:
        marker: dict[str, object] = {
            "name": self.name,
            "python": sys.version.split()[0],
            "steps": self.install_steps,
        }
        if self.build_script is not None:
            script = Path(__file__).with_name(self.build_script).read_bytes()
            marker["build"] = [self.build_script, hashlib.sha256(script).hexdigest()]
        return json.dumps(marker, sort_keys=True)


OPENVIKING_RUNTIME = RuntimeSpec("openviking", (OPENVIKING_REQUIREMENTS,))
TORCH_EMBEDDINGS_RUNTIME = RuntimeSpec("embeddings", ((TORCH_REQUIREMENT,), EMBEDDINGS_REQUIREMENTS))
ONNX_EMBEDDINGS_RUNTIME = RuntimeSpec(
    "embeddings-onnx",
    (ONNX_EMBEDDINGS_REQUIREMENTS, ("--no-deps", ONNX_WEIGHTS_REQUIREMENT)),
    build_script="onnx_build.py",
)


def venv_path(layout: StackLayout, spec: RuntimeSpec) -> Path:
    return layout.venvs_dir / spec.name


def is_provisioned(layout: StackLayout, spec: RuntimeSpec) -> bool:
    """True when the venv exists and was built from exactly this spec."""
    marker = venv_path(layout, spec) / MARKER_NAME
    return marker.is_file() and marker.read_text(encoding="utf-8") == spec.marker_text()


def provision(layout: StackLayout, spec: RuntimeSpec, report: Reporter = print_progress) -> Path:
    """Build the venv unless its marker already matches the spec; return its path.

    Safe to call from several processes at once: a file lock serialises installs.
    """
    venv = venv_path(layout, spec)
    if is_provisioned(layout, spec):
        return venv
    layout.venvs_dir.mkdir(parents=True, exist_ok=True)
    with _install_lock(layout.venvs_dir / f".{spec.name}.lock"):
        if is_provisioned(layout, spec):
            report(f"{spec.name}: provisioned by another process")
            return venv
        started = time.monotonic()
        if venv.exists():
            report(f"{spec.name}: spec changed or install incomplete; rebuilding {venv}")
            shutil.rmtree(venv)
        log_file = layout.venvs_dir / f"{spec.name}.install.log"
        report(f"{spec.name}: creating venv at {venv} (log: {log_file})")
        with log_file.open("w", encoding="utf-8") as log:
            _run([sys.executable, "-m", "venv", str(venv)], log, report, spec.name, started)
            for requirements in spec.install_steps:
                report(f"{spec.name}: pip install {' '.join(requirements)}")
                pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--progress-bar", "off"]
                _run([*pip, *requirements], log, report, spec.name, started)
            if spec.build_script is not None:
                report(f"{spec.name}: {spec.build_script}")
                script = str(Path(__file__).with_name(spec.build_script))
                python = str(venv / "bin" / "python")
                _run([python, "-P", script, str(venv / BUILD_DIR)], log, report, spec.name, started)
        seconds = time.monotonic() - started
        (venv / INSTALL_TIME_NAME).write_text(f"{seconds:.1f}\n", encoding="utf-8")
        (venv / MARKER_NAME).write_text(spec.marker_text(), encoding="utf-8")
        report(f"{spec.name}: installed in {seconds:.0f} s")
        return venv


def install_seconds(layout: StackLayout, spec: RuntimeSpec) -> float | None:
    """How long the venv's last install took, when it was built by this code."""
    recorded = venv_path(layout, spec) / INSTALL_TIME_NAME
    return float(recorded.read_text(encoding="utf-8")) if recorded.is_file() else None


def embedding_model_dir(embeddings_venv: Path) -> Path:
    """The all-MiniLM-L6-v2 files bundled in the installed model package."""
    found = sorted(embeddings_venv.glob(f"lib/python3*/site-packages/{MODEL_PACKAGE}/model"))
    if not found or not (found[0] / "config.json").is_file():
        raise ProvisioningError(f"model folder of {MODEL_PACKAGE} not found under {embeddings_venv}")
    return found[0]


@contextmanager
def _install_lock(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: Sequence[str], log: IO[str], report: Reporter, name: str, started: float) -> None:
    """Run one install command, its output to the log, printing a heartbeat while it runs."""
    with subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT) as process:
        while True:
            try:
                code = process.wait(timeout=HEARTBEAT_SECONDS)
                break
            except subprocess.TimeoutExpired:
                report(f"{name}: still installing ... {time.monotonic() - started:.0f} s")
    if code != 0:
        raise ProvisioningError(f"{name}: {' '.join(argv[:4])} ... exited with {code}; see the install log")
