"""Retries only for idempotent calls; timeouts capped by the caller's deadline."""

from __future__ import annotations

import time

import pytest

from shared.errors import BackendInvalidArgument, BackendTimeout, BackendUnavailable
from shared.openviking import CallTimeouts, DevAuth, NewMessage, OpenVikingClient, RetryPolicy
from tests.openviking_client.conftest import TENANT
from tests.openviking_client.scripted_server import Reply, ScriptedServer, closed_port, error, ok

SESSION = {"session_id": "s1", "message_count": 2}
UNAVAILABLE = error(503, "UNAVAILABLE", "busy")


@pytest.mark.parametrize("failure", [UNAVAILABLE, Reply(502, "bad gateway", content_type="text/plain")])
async def test_idempotent_read_is_retried_on_502_and_503(
    client: OpenVikingClient, scripted: ScriptedServer, failure: Reply
) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", failure, failure, ok(SESSION))
    info = await client.get_session(TENANT, "s1")
    assert info.message_count == 2
    assert len(scripted.calls("GET", "/api/v1/sessions/s1")) == 3


async def test_retries_stop_after_max_attempts(client: OpenVikingClient, scripted: ScriptedServer) -> None:
    scripted.script("POST", "/api/v1/search/find", UNAVAILABLE)
    with pytest.raises(BackendUnavailable) as raised:
        await client.find(TENANT, "q")
    assert raised.value.http_status == 503
    assert len(scripted.calls("POST", "/api/v1/search/find")) == 3  # FAST_RETRY.max_attempts


@pytest.mark.parametrize(
    "failure",
    [error(500, "INTERNAL", "boom"), error(400, "INVALID_ARGUMENT", "bad"), error(404, "NOT_FOUND", "x")],
)
async def test_other_errors_are_not_retried(
    client: OpenVikingClient, scripted: ScriptedServer, failure: Reply
) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", failure, ok(SESSION))
    with pytest.raises(Exception):  # noqa: B017 - the mapping is tested elsewhere
        await client.get_session(TENANT, "s1")
    assert len(scripted.calls("GET", "/api/v1/sessions/s1")) == 1


async def test_non_idempotent_calls_are_never_retried(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    for path in ("/messages", "/messages/batch", "/commit"):
        scripted.script("POST", f"/api/v1/sessions/s1{path}", UNAVAILABLE, ok({"status": "skipped"}))
    scripted.script("POST", "/api/v1/sessions", UNAVAILABLE, ok({"session_id": "s1"}))
    scripted.script("POST", "/api/v1/content/write", UNAVAILABLE, ok({"uri": "viking://x"}))
    message = NewMessage(role="user", content="hi")

    with pytest.raises(BackendUnavailable):
        await client.add_message(TENANT, "s1", message)
    with pytest.raises(BackendUnavailable):
        await client.add_messages(TENANT, "s1", [message, message])
    with pytest.raises(BackendUnavailable):
        await client.commit_session(TENANT, "s1")
    with pytest.raises(BackendUnavailable):
        await client.create_session(TENANT, "s1")
    with pytest.raises(BackendUnavailable):
        await client.write(TENANT, "viking://~/memories/a.md", "x", mode="append")

    assert [(r.method, r.path) for r in scripted.requests] == [
        ("POST", "/api/v1/sessions/s1/messages"),
        ("POST", "/api/v1/sessions/s1/messages/batch"),
        ("POST", "/api/v1/sessions/s1/commit"),
        ("POST", "/api/v1/sessions"),
        ("POST", "/api/v1/content/write"),
    ]


async def test_replace_write_and_delete_are_retried(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script(
        "POST", "/api/v1/content/write", UNAVAILABLE, ok({"uri": "viking://user/alice/memories/a.md"})
    )
    scripted.script("DELETE", "/api/v1/fs", UNAVAILABLE, ok({"uri": "u", "estimated_deleted_count": 1}))
    await client.write(TENANT, "viking://~/memories/a.md", "x")
    removed = await client.rm(TENANT, "viking://~/memories/a.md")
    assert removed.estimated_deleted_count == 1
    assert len(scripted.calls("POST", "/api/v1/content/write")) == 2
    assert len(scripted.calls("DELETE", "/api/v1/fs")) == 2


async def test_connection_errors_are_retried_for_idempotent_calls() -> None:
    attempts = 0

    def count() -> dict[str, str]:
        nonlocal attempts
        attempts += 1
        return {}

    retry = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.01)
    base_url = f"http://127.0.0.1:{closed_port()}"
    async with OpenVikingClient(base_url, DevAuth(), retry=retry, header_providers=[count]) as ov:
        with pytest.raises(BackendUnavailable):
            await ov.get_session(TENANT, "s1")
        assert attempts == 3
        with pytest.raises(BackendUnavailable):
            await ov.add_message(TENANT, "s1", NewMessage(role="user", content="hi"))
        assert attempts == 4


async def test_retries_are_bounded_by_the_deadline(scripted: ScriptedServer) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", UNAVAILABLE)
    retry = RetryPolicy(max_attempts=1000, initial_backoff=0.05, max_backoff=0.05, multiplier=1.0)
    async with OpenVikingClient(scripted.base_url, DevAuth(), retry=retry) as ov:
        started = time.monotonic()
        # the last attempt may be cut by the deadline itself: a timeout then
        with pytest.raises((BackendUnavailable, BackendTimeout)):
            await ov.get_session(TENANT, "s1", deadline=started + 0.5)
        elapsed = time.monotonic() - started
    assert elapsed < 0.6
    assert 2 <= len(scripted.calls("GET", "/api/v1/sessions/s1")) < 1000


async def test_slow_answer_times_out_at_the_deadline(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", Reply(200, {"status": "ok", "result": SESSION}, delay=2.0))
    started = time.monotonic()
    with pytest.raises(BackendTimeout) as raised:
        await client.get_session(TENANT, "s1", deadline=started + 0.3)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 1.0
    assert raised.value.http_status == 0
    assert raised.value.code == "DEADLINE_EXCEEDED"
    assert len(scripted.calls("GET", "/api/v1/sessions/s1")) == 1  # timeouts are not retried


async def test_default_timeout_applies_without_a_deadline(scripted: ScriptedServer) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", Reply(200, {"status": "ok", "result": SESSION}, delay=2.0))
    async with OpenVikingClient(scripted.base_url, DevAuth(), timeouts=CallTimeouts(read=0.2)) as ov:
        started = time.monotonic()
        with pytest.raises(BackendTimeout):
            await ov.get_session(TENANT, "s1")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("wait", [False, True])
async def test_a_content_write_waits_as_long_as_its_processing_may_take(
    scripted: ScriptedServer, wait: bool
) -> None:
    """Without `wait` a write is answered at once: it has a small write's timeout, not the
    minutes a write waiting for its embedding may take (a hung small write held a compaction
    job, and its lease, for 150 s)."""
    root, uri = "viking://resources/x", "viking://resources/x/a.json"
    answer = {"status": "ok", "result": {"root_uri": root, "created": [uri]}}
    scripted.script("POST", "/api/v1/content/batch-write", Reply(200, answer, delay=3.0))
    short, long = 0.2, 30.0
    timeouts = CallTimeouts(content_write=short if wait else long, append=long if wait else short)
    retry = RetryPolicy(max_attempts=1)
    async with OpenVikingClient(scripted.base_url, DevAuth(), timeouts=timeouts, retry=retry) as ov:
        started = time.monotonic()
        with pytest.raises(BackendTimeout):
            await ov.batch_write(TENANT, root, [{"uri": uri, "content": "{}"}], wait=wait)
    assert time.monotonic() - started < 1.0


async def test_default_timeout_caps_a_later_deadline(scripted: ScriptedServer) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", Reply(200, {"status": "ok", "result": SESSION}, delay=2.0))
    async with OpenVikingClient(scripted.base_url, DevAuth(), timeouts=CallTimeouts(read=0.2)) as ov:
        started = time.monotonic()
        with pytest.raises(BackendTimeout):
            await ov.get_session(TENANT, "s1", deadline=started + 30)
    assert time.monotonic() - started < 1.0


async def test_expired_deadline_raises_without_sending(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", ok(SESSION))
    with pytest.raises(BackendTimeout):
        await client.get_session(TENANT, "s1", deadline=time.monotonic() - 0.001)
    assert scripted.requests == []


async def test_a_validation_error_is_not_retried_even_when_idempotent(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("POST", "/api/v1/search/find", error(400, "INVALID_ARGUMENT", "limit"))
    with pytest.raises(BackendInvalidArgument):
        await client.find(TENANT, "q", limit=0)
    assert len(scripted.requests) == 1
    assert scripted.requests[0].body == {"query": "q", "limit": 0}
