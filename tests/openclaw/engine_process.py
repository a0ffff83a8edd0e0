"""The engine (`--service all`) as a process on a fixed port, so it can be stopped and restarted."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from shared.localstack.processes import free_port
from tests.openclaw.toolchain import REPO

START_SECONDS = 60.0


@dataclass
class EngineProcess:
    env: dict[str, str]
    log_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[str] | None = None
    starts: int = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        log_file = self.log_dir / f"engine-{self.starts}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "shared.runtime.main", "--service", "all", "--port", str(self.port)],
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=log_file.open("w"),
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if " listening on " in line:
                return
            if not line and self.process.poll() is not None:
                break
        self.process.kill()
        raise AssertionError(f"the engine did not start:\n{log_file.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
