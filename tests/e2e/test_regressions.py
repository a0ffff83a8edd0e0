"""docs/design.md §10.3 regressions that need their own engine: OpenViking unavailable (graceful
degradation) and an old upstream-plugin config file still starting the engine. Public gRPC API only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from shared.localstack.processes import free_port
from tests.e2e.host import HostSession, Stubs, all_text, engine, new_user_id, text_message
from tests.support.stack import OpenVikingEndpoint

REPO = Path(__file__).resolve().parents[2]
ACCOUNT = f"e2e-reg-{uuid.uuid4().hex[:8]}"
START_TIMEOUT_SECONDS = 60.0


@pytest.fixture(scope="module")
async def openviking_down() -> AsyncIterator[Stubs]:
    """The engine pointed at a port where nothing listens (OpenViking down)."""
    port = free_port()
    async with engine(baseUrl=f"http://127.0.0.1:{port}", timeoutMs=2_000, recallTimeoutMs=2_000) as stubs:
        yield stubs


async def test_openviking_unavailable_degrades_gracefully(openviking_down: Stubs) -> None:
    """Assemble still returns the host's messages, flagged degraded; writes say UNAVAILABLE."""
    host = HostSession(openviking_down, ACCOUNT, new_user_id("down"), session="s-down")
    host.transcript = [
        text_message(1, "Which database does project X use?", "u0"),
        text_message(2, "PostgreSQL 16.", "a0"),
    ]
    prompt = "And which version of it exactly?"
    assembled = await host.assemble(prompt)
    assert assembled.packet.degraded and assembled.packet.degraded_reasons
    assert [m.id for m in assembled.messages] == ["u0", "a0", "pending"]
    assert all_text(assembled.messages).endswith(prompt)
    assert not assembled.packet.recalled_memories

    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await host.turn(prompt, "16.4.", assemble=False)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.aio.AioRpcError) as stored:
        await host.store("I prefer dark theme.")
    assert stored.value.code() == grpc.StatusCode.UNAVAILABLE
    recalled = await host.recall("which theme?")
    assert recalled.degraded and not recalled.memories


def _upstream_plugin_config(base_url: str) -> dict[str, object]:
    """An OpenClaw config as the upstream openviking plugin stored it (keys the engine ignores
    included)."""
    return {
        "plugins": {
            "entries": {
                "openviking": {
                    "enabled": True,
                    "config": {
                        "mode": "remote",
                        "baseUrl": base_url,
                        "agentId": "main",
                        "timeoutMs": 30000,
                        "autoRecall": True,
                        "autoCapture": True,
                        "recallLimit": 6,
                        "recallScoreThreshold": 0.15,
                        "recallMaxContentChars": 500,
                        "recallPreferAbstract": True,
                        "recallTokenBudget": 2000,
                        "targetUri": "viking://user/memories",
                        "captureMode": "semantic",
                        "commitTokenThreshold": 20000,
                        "recallResources": False,
                        "emitStandardDiagnostics": False,
                    },
                }
            }
        }
    }


@pytest.fixture
def engine_from_old_config(openviking: OpenVikingEndpoint, tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "openclaw-openviking.json"
    config.write_text(json.dumps(_upstream_plugin_config(openviking.base_url)), encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_ENGINE_")}
    environ["CONTEXT_ENGINE_SHUTDOWN_GRACE_SECONDS"] = "1"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "shared.runtime.main",
            "--config",
            str(config),
            "--service",
            "all",
            "--port",
            "0",
        ],
        cwd=REPO,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        first_line: list[str] = []
        reader = threading.Thread(target=lambda: first_line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(START_TIMEOUT_SECONDS)
        assert first_line and "listening on" in first_line[0], f"engine did not start: {first_line}"
        yield first_line[0].rsplit(" ", 1)[-1].strip()
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.stack
async def test_old_plugin_config_file_still_starts_the_engine(engine_from_old_config: str) -> None:
    """An upstream plugin config (`plugins.entries.openviking.config`) starts all three services,
    which serve and work against OpenViking."""
    async with grpc.aio.insecure_channel(engine_from_old_config) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in (
            "",
            "contextengine.v1.CaptureService",
            "contextengine.v1.AssemblyService",
            "contextengine.v1.CompactionService",
        ):
            checked = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=10)
            assert checked.status == health_pb2.HealthCheckResponse.SERVING, name
        host = HostSession(Stubs.on(channel), ACCOUNT, new_user_id("oldcfg"), session="s-old")
        stored = await host.store("Project X runs on PostgreSQL 16.")
        assert stored.created
        recalled = await host.recall("which database does project X run on?")
        assert stored.uri in [m.uri for m in recalled.memories]
        turn = await host.turn("Which database for project X?", "PostgreSQL 16.")
        assert turn.persisted_count == 2
