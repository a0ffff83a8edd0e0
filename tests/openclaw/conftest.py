"""Fixtures for the OpenClaw end-to-end tests: toolchain, engine process, stand-in model, host
(one set per test module, so each module can pin its own host)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from shared.config import load_settings
from shared.runtime.main import ServiceHost, start_host
from tests.openclaw.engine_process import EngineProcess
from tests.openclaw.host import RECALL_LIMIT, OpenClawHost
from tests.openclaw.toolchain import OPENCLAW_VERSION, Toolchain, build_plugin, install_toolchain
from tests.support.stack import OpenVikingEndpoint
from tests.support.standin_llm import StandinLlm
from tests.telemetry.otlp_receiver import OtlpReceiver, running_otlp_receiver


@pytest.fixture(scope="module")
def toolchain(request: pytest.FixtureRequest) -> Toolchain:
    """The host a test module pins (`OPENCLAW_HOST_VERSION`, default the newest release)."""
    toolchain = install_toolchain(getattr(request.module, "OPENCLAW_HOST_VERSION", OPENCLAW_VERSION))
    build_plugin()
    return toolchain


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("openclaw-e2e")


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with running_otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def model(workdir: Path) -> Iterator[StandinLlm]:
    with StandinLlm(log_path=workdir / "model-requests.jsonl") as llm:
        yield llm


@pytest.fixture(scope="module")
def engine(openviking: OpenVikingEndpoint, receiver: OtlpReceiver, workdir: Path) -> Iterator[EngineProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CONTEXT_ENGINE_"))}
    env.update(
        {
            "CONTEXT_ENGINE_BASE_URL": openviking.base_url,
            "CONTEXT_ENGINE_SHUTDOWN_GRACE_SECONDS": "5",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
    )
    process = EngineProcess(env=env, log_dir=workdir)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def openclaw(
    request: pytest.FixtureRequest,
    *,
    toolchain: Toolchain,
    engine: EngineProcess,
    model: StandinLlm,
    receiver: OtlpReceiver,
    workdir: Path,
) -> Iterator[OpenClawHost]:
    """The host, plugin installed, Gateway running; a test module's `BEFORE_GATEWAY(host)` runs
    first (e.g. embedded turns, which the host refuses while a Gateway runs)."""
    host = OpenClawHost(
        toolchain,
        workdir / "openclaw",
        model.base_url,
        plugin_config={
            "agentId": "main",
            "timeoutMs": 15000,
            "recallLimit": RECALL_LIMIT,
            "engine": {"target": engine.target, "assembleDeadlineMs": 5000, "commitTurnDeadlineMs": 10000},
        },
        extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "openclaw"},
    )
    host.setup()
    getattr(request.module, "BEFORE_GATEWAY", lambda _host: None)(host)
    try:
        host.start_gateway()
        yield host
    finally:
        host.stop_gateway()


@pytest.fixture
async def engine_in_process(openviking: OpenVikingEndpoint) -> AsyncIterator[ServiceHost]:
    """The engine's three services in this process (for the plugin driven from Node)."""
    settings = load_settings(
        environ={}, overrides={"baseUrl": openviking.base_url, "shutdownGraceSeconds": 1}
    )
    host = await start_host(settings, "all", port=0)
    try:
        yield host
    finally:
        await host.stop()
