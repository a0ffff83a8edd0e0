"""The real local stack: embeddings, OpenViking without and with the stand-in LLM."""

from __future__ import annotations

import base64
import struct
import time
from typing import Any

import httpx
import pytest

from tests.support.stack import EmbeddingsEndpoint, OpenVikingEndpoint, OpenVikingWithLlm

pytestmark = pytest.mark.stack

TIMEOUT = httpx.Timeout(120.0)


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == httpx.codes.OK, response.text
    body = response.json()
    assert body["status"] == "ok", body
    return body.get("result")


def _poll_task(client: httpx.Client, task_id: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task: dict[str, Any] = _ok(client.get(f"/api/v1/tasks/{task_id}"))
        if task["status"] in {"completed", "failed", "cancelled"}:
            return task
        assert time.monotonic() < deadline, f"task {task_id} still {task['status']}"
        time.sleep(0.25)


def _find_memory(client: httpx.Client, query: str, uri_part: str, timeout: float = 60.0) -> dict[str, Any]:
    """The first level-2 memory hit whose URI contains ``uri_part``; indexing may lag the task a little."""
    deadline = time.monotonic() + timeout
    while True:
        body = {"query": query, "target_uri": "viking://~/memories", "level": 2}
        found = _ok(client.post("/api/v1/search/find", json=body))
        hits = [hit for hit in found["memories"] if uri_part in hit["uri"]]
        if hits:
            return dict(hits[0])
        assert time.monotonic() < deadline, f"no {uri_part} memory found: {found}"
        time.sleep(0.5)


def test_embeddings_return_384_floats(embeddings: EmbeddingsEndpoint) -> None:
    with httpx.Client(base_url=embeddings.base_url, timeout=TIMEOUT) as client:
        as_float = client.post(
            "/embeddings",
            json={"input": ["dark theme"], "model": embeddings.model, "encoding_format": "float"},
        )
        as_base64 = client.post(
            "/embeddings",
            json={"input": "dark theme", "model": embeddings.model, "encoding_format": "base64"},
        )
    assert as_float.status_code == httpx.codes.OK, as_float.text
    vector = as_float.json()["data"][0]["embedding"]
    assert len(vector) == embeddings.dimension == 384
    assert all(isinstance(value, float) for value in vector)
    raw = base64.b64decode(as_base64.json()["data"][0]["embedding"])
    decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
    assert len(decoded) == 384
    assert decoded == pytest.approx(vector, abs=1e-4)


def test_openviking_is_healthy_with_extraction_off(openviking: OpenVikingEndpoint) -> None:
    health = httpx.get(f"{openviking.base_url}/health", timeout=TIMEOUT).json()
    assert health["healthy"] is True
    assert health["version"] == "0.5.2"
    assert health["auth_mode"] == "dev"
    assert openviking.extraction_enabled is False


def test_openviking_runs_without_usage_audit_on_httptools_and_uvloop(openviking: OpenVikingEndpoint) -> None:
    """How the stack runs OpenViking to spend less of its CPU per call (`openviking_config`,
    `pins.OPENVIKING_REQUIREMENTS`): its usage-audit console answers that the audit is off, and
    the server process has uvicorn's C HTTP parser and libuv loop loaded."""
    with httpx.Client(base_url=openviking.base_url, timeout=TIMEOUT) as client:
        _ok(client.get("/api/v1/fs/ls", params={"uri": "viking://resources"}))
        summary = _ok(client.get("/api/v1/console/dashboard/summary"))
    assert summary["enabled"] is False, summary
    with open(f"/proc/{openviking.pid}/maps", encoding="utf-8") as maps:
        mapped = maps.read()
    assert "/uvloop/" in mapped and "/httptools/" in mapped


def test_written_memory_is_found(openviking: OpenVikingEndpoint) -> None:
    with httpx.Client(base_url=openviking.base_url, timeout=TIMEOUT) as client:
        _ok(
            client.post(
                "/api/v1/content/write",
                json={
                    "uri": "viking://~/memories/notes/editor.md",
                    "content": "The user prefers a dark colour theme in the code editor.",
                    "wait": True,
                },
            )
        )
        found = _ok(
            client.post(
                "/api/v1/search/find",
                json={"query": "which editor theme does the user like", "target_uri": "viking://~/memories"},
            )
        )
    hits = [hit for hit in found["memories"] if hit["uri"].endswith("notes/editor.md")]
    assert hits, found
    assert hits[0]["score"] > 0.5


@pytest.mark.llm
def test_commit_with_standin_llm_extracts_memories(openviking_llm: OpenVikingWithLlm) -> None:
    session = f"ls-llm-{time.monotonic_ns()}"
    with httpx.Client(base_url=openviking_llm.base_url, timeout=TIMEOUT) as client:
        messages = [
            {"role": "user", "content": "I prefer dark theme in every editor."},
            {"role": "assistant", "content": "Noted: dark theme."},
            {"role": "user", "content": "We decided to use PostgreSQL for the orders service."},
            {"role": "assistant", "content": "PostgreSQL it is."},
        ]
        _ok(client.post(f"/api/v1/sessions/{session}/messages/batch", json={"messages": messages}))
        commit = _ok(client.post(f"/api/v1/sessions/{session}/commit", json={"enable_working_memory": True}))
        assert commit["status"] == "accepted"
        task = _poll_task(client, commit["task_id"])
        assert task["status"] == "completed", task
        assert task["result"]["memories_extracted"].get("memory_write", 0) >= 2, task
        preference = _find_memory(client, "dark theme editor preference", "/preferences/")
        context = _ok(client.get(f"/api/v1/sessions/{session}/context"))
    assert preference["score"] > 0.5, preference
    overview = context["latest_archive_overview"]
    assert "## Key Facts & Decisions" in overview
    assert "We decided to use PostgreSQL" in overview
    assert {"working_memory", "extraction"} <= set(openviking_llm.llm.kinds_seen())


@pytest.mark.llm
def test_commit_fails_when_the_llm_fails(openviking_llm: OpenVikingWithLlm) -> None:
    session = f"ls-llm-fail-{time.monotonic_ns()}"
    openviking_llm.llm.fail = True
    try:
        with httpx.Client(base_url=openviking_llm.base_url, timeout=TIMEOUT) as client:
            message = {"role": "user", "content": "I prefer short answers."}
            _ok(client.post(f"/api/v1/sessions/{session}/messages", json=message))
            commit = _ok(client.post(f"/api/v1/sessions/{session}/commit", json={}))
            task = _poll_task(client, commit["task_id"])
    finally:
        openviking_llm.llm.fail = False
    assert task["status"] == "failed", task
    assert "500" in (task["error"] or ""), task
