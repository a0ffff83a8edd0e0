"""`pip install ./clients/python` into an empty venv, then its README snippet against a real engine."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from contextengine.v1 import assembly_pb2, common_pb2
from contextengine_client import ContextEngine, Conversation, identity
from grpc import aio

from .conftest import README_TARGET, REPO, readme_snippet

PACKAGE = REPO / "clients" / "python"
pytestmark = pytest.mark.stack


def _requirement_floor(name: str) -> str:
    requirements = tomllib.loads((PACKAGE / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    (spec,) = [r for r in requirements if re.match(rf"{name}\b", r)]
    floor = re.search(r">=([0-9.]+)", spec)
    assert floor, spec
    return floor[1]


def test_runtime_requirements_are_what_the_generated_code_checks() -> None:
    stub = (REPO / "gen/python/contextengine/v1/assembly_pb2.py").read_text("utf-8")
    grpc_stub = (REPO / "gen/python/contextengine/v1/assembly_pb2_grpc.py").read_text("utf-8")
    protobuf_made_with = re.search(r"# Protobuf Python Version: ([0-9.]+)", stub)
    grpc_made_with = re.search(r"GRPC_GENERATED_VERSION = '([0-9.]+)'", grpc_stub)
    assert protobuf_made_with and grpc_made_with
    assert _requirement_floor("protobuf") == protobuf_made_with[1]
    assert _requirement_floor("grpcio") == grpc_made_with[1]


def test_the_package_version_is_the_contract_version() -> None:
    version = tomllib.loads((PACKAGE / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    assert sorted(p.name for p in (REPO / "protos/contextengine").iterdir()) == ["v1"]
    assert version.split(".")[0] == "1"


@pytest.fixture(scope="module")
async def scratch_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty venv with only `pip install ./clients/python` in it (from PyPI: grpcio, protobuf)."""
    venv = tmp_path_factory.mktemp("client-venv")

    def install() -> None:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        subprocess.run(
            [str(venv / "bin/pip"), "install", "--quiet", "--disable-pip-version-check", str(PACKAGE)],
            check=True,
            timeout=600,
            cwd=venv,
        )

    await asyncio.to_thread(install)
    return venv / "bin/python"


async def test_readme_snippet_recalls_session_one_in_session_two(
    scratch_python: Path, engine_address: str, tmp_path: Path
) -> None:
    snippet = readme_snippet(PACKAGE / "README.md", "python")
    user = f"newcomer-{uuid.uuid4().hex[:8]}"  # this run's own user: nothing recalled from others
    script = tmp_path / "host.py"
    script.write_text(snippet.replace(README_TARGET, engine_address).replace('"alice"', f'"{user}"'))
    process = await asyncio.create_subprocess_exec(
        str(scratch_python), str(script), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=180)
    text = output.decode()
    assert process.returncode == 0, text
    (recalled,) = [line for line in text.splitlines() if line.startswith("recalled: ")]
    assert "PostgreSQL 16" in recalled, text


@pytest.fixture
async def flaky_assembly() -> AsyncIterator[tuple[str, list[int]]]:
    """A gRPC server whose Assemble is UNAVAILABLE twice, then answers: the retry policy's subject."""
    calls: list[int] = []

    async def assemble(request: bytes, context: aio.ServicerContext[bytes, bytes]) -> bytes:
        calls.append(len(calls))
        if len(calls) <= 2:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "warming up")
        return assembly_pb2.AssembleResponse(estimated_tokens=7).SerializeToString()

    server = aio.server()
    handler = grpc.unary_unary_rpc_method_handler(assemble)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("contextengine.v1.AssemblyService", {"Assemble": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}", calls
    await server.stop(None)


async def test_unavailable_is_retried_and_other_statuses_are_not(
    flaky_assembly: tuple[str, list[int]], engine_address: str
) -> None:
    target, calls = flaky_assembly
    async with ContextEngine.connect(target) as engine:
        answer = await engine.assemble(identity("a", "u", "s"), [])
    assert answer.estimated_tokens == 7
    assert len(calls) == 3
    async with ContextEngine.connect(engine_address) as engine:
        with pytest.raises(aio.AioRpcError) as refused:
            await engine.assemble(common_pb2.Identity(account_id="a", user_id="u"), [])
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "session_id" in (refused.value.details() or "")


async def test_a_second_assemble_asks_again_for_the_same_open_turn(engine_address: str) -> None:
    async with ContextEngine.connect(engine_address) as engine:
        talk = Conversation(engine, identity("a", f"u-{uuid.uuid4().hex[:8]}", "s"))
        await talk.assemble("first wording")
        await talk.assemble("second wording")
        stored = await talk.after_turn("an answer")
        with pytest.raises(RuntimeError, match="assemble"):
            await talk.after_turn("no turn is open")
    assert len(talk.transcript) == 2
    assert stored.persisted_count == 2
