"""Run one server as a child process group: start, wait until ready, stop (TERM, then KILL)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from shared.localstack.errors import StartupError
from shared.localstack.progress import Reporter, print_progress

PROGRESS_EVERY_SECONDS = 5.0
POLL_SECONDS = 0.25


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class ProcessSpec:
    """How to launch one server and how to tell that it is ready."""

    name: str
    argv: tuple[str, ...]
    ready_url: str
    """GET returning 200 means ready."""
    log_file: Path
    """stdout and stderr of the process."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Added to (and overriding) the parent's environment."""
    pid_file: Path | None = None
    """Where to record the pid while the process runs (read by ``status``/``down``)."""


class ManagedProcess:
    """A started server; its own process group, so ``stop()`` also ends its children."""

    def __init__(self, spec: ProcessSpec, process: subprocess.Popen[bytes]) -> None:
        self.spec = spec
        self._process = process
        self._spawned_at = time.monotonic()

    @property
    def pid(self) -> int:
        """Also the process group id."""
        return self._process.pid

    @classmethod
    def spawn(cls, spec: ProcessSpec) -> ManagedProcess:
        spec.log_file.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_file.open("ab") as log:
            process = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **spec.env},
                start_new_session=True,
            )
        if spec.pid_file is not None:
            spec.pid_file.parent.mkdir(parents=True, exist_ok=True)
            spec.pid_file.write_text(f"{process.pid}\n", encoding="utf-8")
        return cls(spec, process)

    def wait_ready(self, timeout: float, report: Reporter = print_progress) -> float:
        """Block until the ready URL answers 200; return the seconds since spawn."""
        started = self._spawned_at
        next_report = time.monotonic() + PROGRESS_EVERY_SECONDS
        with httpx.Client(timeout=2.0) as client:
            while True:
                elapsed = time.monotonic() - started
                if self._process.poll() is not None:
                    raise StartupError(
                        f"{self.spec.name} exited with {self._process.returncode} after {elapsed:.1f} s; "
                        f"log {self.spec.log_file}:\n{_tail(self.spec.log_file)}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.spec.ready_url).status_code == httpx.codes.OK:
                        report(f"{self.spec.name}: ready after {elapsed:.1f} s")
                        return elapsed
                if elapsed > timeout:
                    self.stop()
                    raise StartupError(
                        f"{self.spec.name} not ready after {timeout:.0f} s; log {self.spec.log_file}:\n"
                        f"{_tail(self.spec.log_file)}"
                    )
                if time.monotonic() >= next_report:
                    report(f"{self.spec.name}: starting ... {elapsed:.0f} s")
                    next_report += PROGRESS_EVERY_SECONDS
                time.sleep(POLL_SECONDS)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL whatever is left after ``timeout``; idempotent."""
        _signal_group(self.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(self.pid, signal.SIGKILL)
            self._process.wait()
        # Children that outlived the leader (same group) go too.
        _signal_group(self.pid, signal.SIGKILL)
        if self.spec.pid_file is not None:
            self.spec.pid_file.unlink(missing_ok=True)


def group_alive(pgid: int) -> bool:
    """True while any process of the group exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
