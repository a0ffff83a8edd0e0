"""`context-engine doctor` names each broken dependency in one line, found by stopping each."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.cli.doctor import Finding, diagnose
from shared.localstack.layout import StackLayout
from shared.localstack.processes import free_port
from shared.localstack.progress import silent
from shared.localstack.stack import LocalStack, StackSettings
from tests.support.stack import EmbeddingsEndpoint, OpenVikingEndpoint

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.stack


def failures(findings: list[Finding]) -> list[str]:
    return [f.line() for f in findings if not f.ok]


def env(base_url: str, **more: str) -> dict[str, str]:
    return {"CONTEXT_ENGINE_BASE_URL": base_url, **more}


async def test_a_working_engine_has_no_failure(openviking: OpenVikingEndpoint, engine_address: str) -> None:
    findings = await diagnose(None, env(openviking.base_url), engine_address)
    assert failures(findings) == []
    checked = {f.dependency for f in findings}
    assert checked == {"python", "protobuf", "grpcio", "config", "openviking", "embedder", "engine"}
    assert [f.detail for f in findings if f.dependency == "engine"][1:] == [
        "CaptureService SERVING",
        "AssemblyService SERVING",
        "CompactionService SERVING",
    ]


def _private_openviking(layout: StackLayout, tmp: Path, embeddings_url: str) -> LocalStack:
    settings = StackSettings(
        layout=layout,
        openviking_data_dir=tmp / "openviking",
        openviking_port=0,
        embeddings_url=embeddings_url,
        report=silent,
    )
    return LocalStack(settings)


async def test_a_stopped_openviking_is_one_line(
    stack_layout: StackLayout, embeddings: EmbeddingsEndpoint, engine_address: str, tmp_path: Path
) -> None:
    stack = _private_openviking(stack_layout, tmp_path, embeddings.base_url)
    await asyncio.to_thread(stack.start)
    url = stack.openviking_url
    await asyncio.to_thread(stack.stop)
    (line,) = failures(await diagnose(None, env(url), engine_address))
    assert line.startswith(f"FAIL  openviking  {url}: unreachable")
    assert "start it (make run, or python -m shared.localstack up) or set CONTEXT_ENGINE_BASE_URL" in line


async def test_a_stopped_embedder_is_one_line(
    stack_layout: StackLayout, engine_address: str, tmp_path: Path
) -> None:
    # OpenViking starts and says it is healthy without its embedder; only a query shows it.
    stack = _private_openviking(stack_layout, tmp_path, f"http://127.0.0.1:{free_port()}/v1")
    await asyncio.to_thread(stack.start)
    try:
        (line,) = failures(await diagnose(None, env(stack.openviking_url), engine_address))
    finally:
        await asyncio.to_thread(stack.stop)
    assert line.startswith("FAIL  embedder    OpenViking cannot embed a query")
    assert "CONTEXT_ENGINE_EMBEDDINGS_PORT" in line


async def test_a_stopped_engine_is_one_line(openviking: OpenVikingEndpoint) -> None:
    target = f"127.0.0.1:{free_port()}"
    assert failures(await diagnose(None, env(openviking.base_url), target)) == [
        f"FAIL  engine      {target}: nothing listens -> start it (make run, or context-engine "
        "--service all), or pass --target"
    ]


@pytest.fixture
def not_grpc() -> Iterator[str]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


async def test_another_program_on_the_engine_port_is_one_line(
    openviking: OpenVikingEndpoint, not_grpc: str
) -> None:
    (line,) = failures(await diagnose(None, env(openviking.base_url), not_grpc))
    assert line.startswith(f"FAIL  engine      {not_grpc} answers, but not as the engine")
    assert "CONTEXT_ENGINE_GRPC_PORT" in line


async def test_bad_config_is_one_line_per_problem_and_stops_there(openviking: OpenVikingEndpoint) -> None:
    environ = env(openviking.base_url, CONTEXT_ENGINE_RECALL_LIMIT="0", CONTEXT_ENGINE_RECAL_LIMIT="6")
    lines = failures(await diagnose(None, environ, None))
    assert len(lines) == 2
    assert lines[0].startswith("FAIL  config      CONTEXT_ENGINE_RECAL_LIMIT: not a context-engine setting")
    assert lines[1].startswith("FAIL  config      recallLimit: ")
    assert "the CONTEXT_ENGINE_* environment" in lines[1]


async def test_the_command_exits_1_and_prints_the_lines(openviking: OpenVikingEndpoint) -> None:
    target = f"127.0.0.1:{free_port()}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shared.cli", "doctor", "--target", target,
        cwd=REPO, env={"CONTEXT_ENGINE_BASE_URL": openviking.base_url, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 1, err.decode()
    lines = out.decode().splitlines()
    assert [line.split()[0] for line in lines] == ["ok"] * 6 + ["FAIL"]
    assert lines[-1].startswith(f"FAIL  engine      {target}: nothing listens")
