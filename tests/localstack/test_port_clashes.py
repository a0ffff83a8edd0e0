"""A taken port is one line naming the port and the setting that moves it, before anything starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.localstack.errors import LocalStackError
from shared.localstack.layout import StackLayout
from shared.localstack.ports import PortInUse, ensure_free, port_from_env
from shared.localstack.progress import silent
from shared.localstack.stack import LocalStack, StackSettings

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_taken_port_names_itself_and_its_setting(taken_port: int) -> None:
    with pytest.raises(PortInUse) as raised:
        ensure_free(taken_port, "OpenViking", "CONTEXT_ENGINE_PORT")
    message = str(raised.value)
    assert "\n" not in message
    assert f"port {taken_port} (OpenViking) is already in use" in message
    assert "set CONTEXT_ENGINE_PORT to another port" in message


def test_port_zero_is_always_free() -> None:
    ensure_free(0, "OpenViking", "CONTEXT_ENGINE_PORT")


@pytest.mark.parametrize("value", ["abc", "70000", "-1", "1.5"])
def test_a_port_variable_that_is_not_a_port_is_refused_by_name(value: str) -> None:
    with pytest.raises(LocalStackError, match=r"^CONTEXT_ENGINE_EMBEDDINGS_PORT: expected a port"):
        port_from_env("CONTEXT_ENGINE_EMBEDDINGS_PORT", 8011, {"CONTEXT_ENGINE_EMBEDDINGS_PORT": value})


def test_port_variables_default_and_parse() -> None:
    assert port_from_env("X", 8011, {}) == 8011
    assert port_from_env("X", 8011, {"X": " 9000 "}) == 9000


def test_stack_refuses_a_taken_openviking_port_before_spawning(
    taken_port: int, stack_layout: StackLayout, tmp_path: Path
) -> None:
    # An embeddings URL that is never called: the clash is found before anything is spawned.
    settings = StackSettings(
        layout=stack_layout,
        openviking_data_dir=tmp_path / "openviking",
        openviking_port=taken_port,
        embeddings_url="http://127.0.0.1:9/v1",
        report=silent,
    )
    stack = LocalStack(settings)
    with pytest.raises(PortInUse, match=f"port {taken_port} \\(OpenViking\\).*CONTEXT_ENGINE_PORT"):
        stack.start()
    assert stack.processes == []


def test_make_run_with_a_taken_grpc_port_says_so_in_one_line(taken_port: int, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CONTEXT_ENGINE_GRPC_PORT": str(taken_port),
        "CONTEXT_ENGINE_STACK_DIR": str(tmp_path),  # nothing may be installed there
    }
    done = subprocess.run(
        [sys.executable, "-m", "shared.localstack.demo"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: port {taken_port} (the engine's gRPC server) is already in use: stop what holds it "
        f"(`ss -ltnp | grep :{taken_port}`) or set CONTEXT_ENGINE_GRPC_PORT to another port "
        "(0 = any free port)"
    ]
    assert not (tmp_path / "venvs").exists()
