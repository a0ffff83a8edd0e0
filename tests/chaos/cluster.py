"""The chaos cluster: a private OpenViking behind a real delaying TCP proxy, two capture
replicas and one compaction replica as separate `context-engine` processes that the test kills
(-9), stops (SIGTERM) and restarts on the same ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from shared.localstack.processes import free_port
from shared.localstack.stack import LocalStack, StackSettings
from tests.support.delay_proxy import DelayProxy

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 60.0
TERMINATE_TIMEOUT_SECONDS = 60.0


@dataclass
class EngineProcess:
    """One `context-engine --service <service>` process on a fixed port."""

    service: str
    port: int
    env: dict[str, str]
    log_file: Path
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        with self.log_file.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "shared.runtime.main",
                "--service",
                self.service,
                "--port",
                str(self.port),
                cwd=REPO,
                env={**os.environ, **self.env},
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), START_TIMEOUT_SECONDS)
        assert b"listening on" in line, f"{self.service} did not start: {line!r}, see {self.log_file}"

    async def kill(self) -> None:
        """kill -9: no drain, no shutdown hook, claims and leases left behind."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def terminate(self) -> int:
        """SIGTERM and wait (bounded) for the drain to end; the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), TERMINATE_TIMEOUT_SECONDS)

    async def restart(self) -> None:
        self.restarts += 1
        await self.start()

    def dump_tasks(self) -> bool:
        """Ask the running process to log its pending asyncio tasks (`shared.runtime.task_dump`)."""
        if self.process is None or self.process.returncode is not None:
            return False
        self.process.send_signal(signal.SIGUSR1)
        return True


@dataclass
class ChaosCluster:
    workdir: Path
    embeddings_url: str
    compact_turn_threshold: int = 4
    openviking_port: int = field(default_factory=free_port)
    stack: LocalStack | None = None
    proxy: DelayProxy | None = None
    capture: list[EngineProcess] = field(default_factory=list)
    compaction: EngineProcess | None = None

    @property
    def openviking_url(self) -> str:
        return f"http://127.0.0.1:{self.openviking_port}"

    def _stack(self) -> LocalStack:
        return LocalStack(
            StackSettings(
                openviking_data_dir=self.workdir / "openviking",
                openviking_port=self.openviking_port,
                embeddings_url=self.embeddings_url,
                startup_timeout_seconds=180.0,
                report=lambda _line: None,
            )
        )

    async def start_openviking(self) -> None:
        self.stack = self._stack()
        await asyncio.to_thread(self.stack.start)

    async def stop_openviking(self) -> None:
        if self.stack is not None:
            await asyncio.to_thread(self.stack.stop)
            self.stack = None

    def _engine(self, service: str, name: str, compaction_port: int) -> EngineProcess:
        assert self.proxy is not None
        env = {
            "CONTEXT_ENGINE_BASE_URL": self.proxy.base_url,
            "CONTEXT_ENGINE_COMPACTION_TARGET": f"127.0.0.1:{compaction_port}",
            "CONTEXT_ENGINE_COMPACT_TURN_THRESHOLD": str(self.compact_turn_threshold),
            "CONTEXT_ENGINE_SHUTDOWN_GRACE_SECONDS": "15",
            "CONTEXT_ENGINE_MEMORY_EXPAND_MAX_RESULTS": "100",
            "OTEL_SDK_DISABLED": "true",
        }
        return EngineProcess(service, free_port(), env, self.workdir / f"{name}.log")

    async def __aenter__(self) -> ChaosCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        await self.start_openviking()
        self.proxy = await DelayProxy("127.0.0.1", self.openviking_port).__aenter__()
        compaction_port = free_port()
        self.compaction = self._engine("compaction", "compaction", compaction_port)
        self.compaction.port = compaction_port
        self.capture = [self._engine("capture", f"capture-{i}", compaction_port) for i in range(2)]
        await asyncio.gather(self.compaction.start(), *(c.start() for c in self.capture))
        return self

    async def dump_tasks(self) -> list[Path]:
        """Every running engine process logs its pending tasks; the logs that hold them."""
        engines = [*self.capture, *([self.compaction] if self.compaction else [])]
        dumped = [engine.log_file for engine in engines if engine.dump_tasks()]
        await asyncio.sleep(1.0)  # the handlers run on each process's loop
        return dumped

    async def __aexit__(self, *_: object) -> None:
        for engine in [*self.capture, *([self.compaction] if self.compaction else [])]:
            with contextlib.suppress(ProcessLookupError):
                await engine.kill()
        if self.proxy is not None:
            await self.proxy.__aexit__()
        await self.stop_openviking()
