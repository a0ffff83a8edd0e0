"""Each service starts alone and all three together from one entry point: health, reflection,
SIGTERM drain, and a Node.js host calling through the generated TypeScript stubs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest
from contextengine.v1 import assembly_pb2, assembly_pb2_grpc, common_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
SERVICE_NAMES = {
    "capture": "contextengine.v1.CaptureService",
    "assembly": "contextengine.v1.AssemblyService",
    "compaction": "contextengine.v1.CompactionService",
}
SLOW_FIND_SECONDS = 2.0


class _SlowOpenViking(BaseHTTPRequestHandler):
    """A real HTTP server answering like OpenViking, slowly, so calls are in flight."""

    def do_GET(self) -> None:
        self._reply({"status": "ok", "healthy": True, "version": "0.5.2", "auth_mode": "dev"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        time.sleep(SLOW_FIND_SECONDS)
        self._reply({"status": "ok", "result": {"memories": [], "resources": [], "skills": [], "total": 0}})

    def _reply(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def slow_openviking() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowOpenViking)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@contextmanager
def running_service(service: str, base_url: str, **env: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    environ = {
        **os.environ,
        "CONTEXT_ENGINE_BASE_URL": base_url,
        "CONTEXT_ENGINE_COMPACTION_TARGET": "127.0.0.1:1",
        "CONTEXT_ENGINE_SHUTDOWN_GRACE_SECONDS": "10",
        **env,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "shared.runtime.main", "--service", service, "--port", "0"],
        cwd=REPO,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on" in line, f"service did not start: {line!r}"
        yield process, line.rsplit(" ", 1)[-1].strip()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _health(channel: grpc.Channel, name: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5).status


def _reflected_services(channel: grpc.Channel) -> set[str]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    return {service.name for service in response.list_services_response.service}


@pytest.mark.parametrize("service", ["capture", "assembly", "compaction", "all"])
def test_service_starts_serving_with_health_and_reflection(service: str, slow_openviking: str) -> None:
    expected = set(SERVICE_NAMES.values()) if service == "all" else {SERVICE_NAMES[service]}
    with running_service(service, slow_openviking) as (_, address), grpc.insecure_channel(address) as channel:
        serving = health_pb2.HealthCheckResponse.SERVING
        assert _health(channel, "") == serving
        for name in expected:
            assert _health(channel, name) == serving
        reflected = _reflected_services(channel)
        assert expected <= reflected
        assert reflected & set(SERVICE_NAMES.values()) == expected
        assert "grpc.health.v1.Health" in reflected


def _recall_request() -> assembly_pb2.RecallMemoriesRequest:
    identity = common_pb2.Identity(account_id="acme", user_id="alice", agent_id="main", session_id="s-1")
    return assembly_pb2.RecallMemoriesRequest(identity=identity, query="which database for project X")


def test_sigterm_drains_an_in_flight_call(slow_openviking: str) -> None:
    with (
        running_service("assembly", slow_openviking) as (process, address),
        grpc.insecure_channel(address) as channel,
    ):
        stub = assembly_pb2_grpc.AssemblyServiceStub(channel)
        future = stub.RecallMemories.future(_recall_request(), timeout=30)
        time.sleep(SLOW_FIND_SECONDS / 2)  # the call is now waiting on the slow backend
        process.send_signal(signal.SIGTERM)
        response = future.result()
        assert isinstance(response, assembly_pb2.RecallMemoriesResponse)
        assert process.wait(timeout=30) == 0
        # Once draining, new calls are refused.
        with pytest.raises(grpc.RpcError):
            stub.RecallMemories(_recall_request(), timeout=2)


def test_draining_refuses_new_calls_at_once(slow_openviking: str) -> None:
    """Finding 5: the drain accepted new calls for the whole grace period."""
    with (
        running_service("assembly", slow_openviking) as (process, address),
        grpc.insecure_channel(address) as channel,
    ):
        stub = assembly_pb2_grpc.AssemblyServiceStub(channel)
        in_flight = stub.RecallMemories.future(_recall_request(), timeout=30)
        time.sleep(SLOW_FIND_SECONDS / 4)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert _health(channel, SERVICE_NAMES["assembly"]) == health_pb2.HealthCheckResponse.NOT_SERVING
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            stub.RecallMemories(_recall_request(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        assert time.monotonic() - started < SLOW_FIND_SECONDS / 2  # refused, not served
        assert isinstance(in_flight.result(), assembly_pb2.RecallMemoriesResponse)
        assert process.wait(timeout=30) == 0


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_node_client_calls_a_live_service(slow_openviking: str) -> None:
    subprocess.run(["make", "node_modules/.installed"], cwd=REPO, check=True, capture_output=True)
    with running_service("assembly", "http://127.0.0.1:9") as (_, address):
        out = subprocess.run(
            [str(REPO / "node_modules/.bin/tsx"), "tests/runtime/node/assemble_call.ts", address],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert out.returncode == 0, out.stderr
    response = json.loads(out.stdout)
    # OpenViking is unreachable: the host still gets its own message back, flagged degraded.
    assert response["packet"]["degraded"] is True
    texts = [b["text"]["text"] for m in response["messages"] for b in m["content"] if b.get("text")]
    assert "Which database did we pick for project X?" in texts
