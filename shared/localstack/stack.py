"""``LocalStack``: the embedding server and OpenViking started together, with base URLs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from shared.localstack.components import (
    embeddings_base_url,
    embeddings_process,
    openviking_base_url,
    openviking_process,
)
from shared.localstack.embedders import DEFAULT_EMBEDDER, Embedder, embedder_from_env
from shared.localstack.errors import ProvisioningError
from shared.localstack.layout import OpenVikingDataLayout, StackLayout
from shared.localstack.openviking_config import (
    AuthSettings,
    LlmSettings,
    describe_extraction,
    extraction_enabled,
    llm_settings_from_env,
    write_openviking_config,
)
from shared.localstack.ports import EMBEDDINGS_PORT_ENV, OPENVIKING_PORT_ENV, ensure_free, port_from_env
from shared.localstack.processes import ManagedProcess, ProcessSpec, free_port
from shared.localstack.progress import Reporter, print_progress
from shared.localstack.runtimes import (
    OPENVIKING_RUNTIME,
    RuntimeSpec,
    is_provisioned,
    provision,
)

DEFAULT_OPENVIKING_PORT = 1933
DEFAULT_EMBEDDINGS_PORT = 8011


@dataclass(frozen=True)
class StackSettings:
    """What to start and where."""

    layout: StackLayout = field(default_factory=StackLayout.from_env)
    """Stack directory holding ``venvs/`` and ``data/``."""
    openviking_data_dir: Path | None = None
    """OpenViking's ov.conf, workspace and logs; default ``<stack>/data/openviking`` (reused on rerun)."""
    openviking_port: int = DEFAULT_OPENVIKING_PORT
    """0 picks a free port."""
    embeddings_port: int = DEFAULT_EMBEDDINGS_PORT
    """0 picks a free port. Ignored when ``embeddings_url`` is set."""
    embeddings_url: str | None = None
    """Use this already-running embedding server (``.../v1``) instead of starting one."""
    embedder: Embedder = DEFAULT_EMBEDDER
    """Which embedding server to start (``CONTEXT_ENGINE_EMBEDDER``): ONNX, or PyTorch to compare."""
    llm: LlmSettings | None = None
    """Chat model for summaries and extraction; None turns extraction off."""
    auth: AuthSettings = field(default_factory=AuthSettings)
    """OpenViking auth mode (dev by default)."""
    openviking_usage_audit: bool = False
    """OpenViking's per-request usage and audit store (its default: on; the engine reads none of
    it, and it costs OpenViking CPU on every call: `build_openviking_config`)."""
    provision: bool = True
    """Install missing runtimes before starting (minutes, once)."""
    startup_timeout_seconds: float = 300.0
    """Per process, from spawn to ready."""
    report: Reporter = print_progress
    """Receives progress lines."""

    @classmethod
    def from_env(cls) -> StackSettings:
        """Defaults plus the LLM from ``CONTEXT_ENGINE_LLM_*``, the stack dir override and the
        embedding server's port (``CONTEXT_ENGINE_EMBEDDINGS_PORT``)."""
        embeddings_port = port_from_env(EMBEDDINGS_PORT_ENV, DEFAULT_EMBEDDINGS_PORT)
        return cls(llm=llm_settings_from_env(), embeddings_port=embeddings_port, embedder=embedder_from_env())


class LocalStack:
    """Start with ``with``/``async with`` (or ``start()``/``stop()``); exposes the base URLs."""

    def __init__(self, settings: StackSettings | None = None) -> None:
        self.settings = settings or StackSettings.from_env()
        self.openviking_data = OpenVikingDataLayout(
            self.settings.openviking_data_dir or self.settings.layout.data_dir / "openviking"
        )
        self.processes: list[ManagedProcess] = []
        """Started processes, embeddings first."""
        self._openviking_url: str | None = None
        self._embeddings_url: str | None = None

    @property
    def openviking_url(self) -> str:
        """e.g. ``http://127.0.0.1:1933`` (no trailing slash)."""
        if self._openviking_url is None:
            raise RuntimeError("LocalStack is not started")
        return self._openviking_url

    @property
    def embeddings_url(self) -> str:
        """OpenAI-compatible base, e.g. ``http://127.0.0.1:8011/v1``."""
        if self._embeddings_url is None:
            raise RuntimeError("LocalStack is not started")
        return self._embeddings_url

    @property
    def extraction_enabled(self) -> bool:
        return extraction_enabled(self.settings.llm)

    @property
    def extraction_description(self) -> str:
        return describe_extraction(self.settings.llm)

    def start(self) -> None:
        """Provision if needed, start both processes and wait until both are ready."""
        settings = self.settings
        report = settings.report
        layout = settings.layout
        try:
            openviking_venv = self._runtime_venv(OPENVIKING_RUNTIME)
            report(describe_extraction(settings.llm))
            pending: list[ManagedProcess] = []
            if settings.embeddings_url is None:
                embeddings_venv = self._runtime_venv(settings.embedder.runtime)
                ensure_free(settings.embeddings_port, "embedding server", EMBEDDINGS_PORT_ENV)
                port = settings.embeddings_port or free_port()
                log_dir = layout.data_dir / "embeddings"
                spec = embeddings_process(settings.embedder, embeddings_venv, port, log_dir)
                report(f"starting embeddings on {embeddings_base_url(port)}")
                pending.append(self._spawn(spec))
                self._embeddings_url = embeddings_base_url(port)
            else:
                self._embeddings_url = settings.embeddings_url.rstrip("/")
            ensure_free(settings.openviking_port, "OpenViking", OPENVIKING_PORT_ENV)
            ov_port = settings.openviking_port or free_port()
            write_openviking_config(
                self.openviking_data,
                port=ov_port,
                embeddings_api_base=self._embeddings_url,
                llm=settings.llm,
                auth=settings.auth,
                usage_audit=settings.openviking_usage_audit,
            )
            report(
                f"starting openviking on {openviking_base_url(ov_port)} (data {self.openviking_data.root})"
            )
            pending.append(self._spawn(openviking_process(openviking_venv, self.openviking_data, ov_port)))
            for process in pending:
                process.wait_ready(settings.startup_timeout_seconds, report)
            self._openviking_url = openviking_base_url(ov_port)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every started process (OpenViking first); idempotent."""
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()
        self._openviking_url = None
        self._embeddings_url = None

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> LocalStack:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    def _spawn(self, spec: ProcessSpec) -> ManagedProcess:
        process = ManagedProcess.spawn(spec)
        self.processes.append(process)
        return process

    def _runtime_venv(self, spec: RuntimeSpec) -> Path:
        if self.settings.provision or is_provisioned(self.settings.layout, spec):
            return provision(self.settings.layout, spec, self.settings.report)
        raise ProvisioningError(
            f"runtime {spec.name!r} is not installed; run: python -m shared.localstack install"
        )
