"""Error mapping over a real local HTTP server: status kept, OpenViking code/message kept."""

from __future__ import annotations

import pytest

from shared.errors import (
    BackendConflict,
    BackendError,
    BackendInvalidArgument,
    BackendNotFound,
    BackendPermissionDenied,
    BackendTimeout,
    BackendUnauthenticated,
    BackendUnavailable,
)
from shared.openviking import DevAuth, NewMessage, OpenVikingClient, RetryPolicy
from tests.openviking_client.conftest import TENANT
from tests.openviking_client.scripted_server import Reply, ScriptedServer, closed_port, error, ok

ADD = ("POST", "/api/v1/sessions/s1/messages")
MESSAGE = NewMessage(role="user", content="hi")


@pytest.mark.parametrize(
    ("reply", "expected", "http_status", "code", "message"),
    [
        (
            error(400, "INVALID_ARGUMENT", "Invalid request parameters: body.limit: too small"),
            BackendInvalidArgument,
            400,
            "INVALID_ARGUMENT",
            "Invalid request parameters: body.limit: too small",
        ),
        (
            error(404, "NOT_FOUND", "Session s1 not found"),
            BackendNotFound,
            404,
            "NOT_FOUND",
            "Session s1 not found",
        ),
        (
            error(409, "ALREADY_EXISTS", "Resource already exists: Session 's1' already exists"),
            BackendConflict,
            409,
            "ALREADY_EXISTS",
            "Resource already exists: Session 's1' already exists",
        ),
        (
            error(401, "UNAUTHENTICATED", "Invalid API key"),
            BackendUnauthenticated,
            401,
            "UNAUTHENTICATED",
            None,
        ),
        (
            error(403, "PERMISSION_DENIED", "Access denied"),
            BackendPermissionDenied,
            403,
            "PERMISSION_DENIED",
            None,
        ),
        (
            error(503, "UNAVAILABLE", "Upstream model service unavailable: x"),
            BackendUnavailable,
            503,
            "UNAVAILABLE",
            "Upstream model service unavailable: x",
        ),
        (error(500, "INTERNAL", "Internal server error"), BackendUnavailable, 500, "INTERNAL", None),
        (error(504, "DEADLINE_EXCEEDED", "slow"), BackendTimeout, 504, "DEADLINE_EXCEEDED", None),
        # a bare FastAPI-style error and a proxy's HTML page
        (Reply(422, {"detail": "Unprocessable"}), BackendError, 422, "", "Unprocessable"),
        (
            Reply(502, "<html>Bad Gateway</html>", content_type="text/html"),
            BackendUnavailable,
            502,
            "",
            "HTTP 502 Bad Gateway: <html>Bad Gateway</html>",
        ),
        (Reply(500, b""), BackendUnavailable, 500, "", None),
        # HTTP 200 but the envelope says error: mapped by OpenViking's code
        (
            Reply(200, {"status": "error", "error": {"code": "NOT_FOUND", "message": "gone"}}),
            BackendNotFound,
            404,
            "NOT_FOUND",
            "gone",
        ),
    ],
)
async def test_error_responses_map_to_engine_errors_keeping_status_code_and_message(  # noqa: PLR0917
    client: OpenVikingClient,
    scripted: ScriptedServer,
    reply: Reply,
    expected: type[BackendError],
    http_status: int,
    code: str,
    message: str | None,
) -> None:
    scripted.script(*ADD, reply)
    with pytest.raises(expected) as raised:
        await client.add_message(TENANT, "s1", MESSAGE)
    assert type(raised.value) is expected
    assert raised.value.http_status == http_status
    assert raised.value.code == code
    if message is not None:
        assert raised.value.message == message


async def test_non_json_success_body_is_an_invalid_response(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script(*ADD, Reply(200, "not json", content_type="text/plain"))
    with pytest.raises(BackendError) as raised:
        await client.add_message(TENANT, "s1", MESSAGE)
    assert raised.value.code == "INVALID_RESPONSE"
    assert raised.value.http_status == 200


async def test_result_of_wrong_shape_is_an_invalid_response(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("POST", "/api/v1/sessions/s1/commit", ok({"status": "maybe"}))
    with pytest.raises(BackendError) as raised:
        await client.commit_session(TENANT, "s1")
    assert raised.value.code == "INVALID_RESPONSE"


async def test_connection_refused_is_unavailable_with_status_zero() -> None:
    async with OpenVikingClient(
        f"http://127.0.0.1:{closed_port()}", DevAuth(), retry=RetryPolicy(max_attempts=1)
    ) as ov:
        with pytest.raises(BackendUnavailable) as raised:
            await ov.get_session(TENANT, "s1")
    assert raised.value.http_status == 0
    assert raised.value.code == "UNAVAILABLE"


async def test_a_closed_client_sends_nothing_more(scripted: ScriptedServer) -> None:
    scripted.script("GET", "/api/v1/sessions/s1", ok({"session_id": "s1"}))
    ov = OpenVikingClient(scripted.base_url, DevAuth(), retry=RetryPolicy(max_attempts=1))
    await ov.get_session(TENANT, "s1")
    await ov.aclose()
    with pytest.raises(BackendUnavailable, match="closed") as raised:
        await ov.get_session(TENANT, "s1")
    assert raised.value.code == "UNAVAILABLE"
    assert len(scripted.calls("GET", "/api/v1/sessions/s1")) == 1


async def test_missing_envelope_keys_are_null(client: OpenVikingClient, scripted: ScriptedServer) -> None:
    # commit and find omit error/telemetry/profile; null values take the field defaults
    scripted.script(
        "POST",
        "/api/v1/sessions/s1/commit",
        Reply(200, {"status": "ok", "result": {"status": "skipped", "task_id": None, "archived": None}}),
    )
    result = await client.commit_session(TENANT, "s1")
    assert (result.status, result.task_id, result.archived, result.archive_id) == (
        "skipped",
        None,
        False,
        None,
    )

    scripted.script("POST", "/api/v1/search/find", Reply(200, {"status": "ok"}))
    found = await client.find(TENANT, "q")
    assert (found.memories, found.total) == ([], 0)


async def test_ready_returns_not_ready_instead_of_raising(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("GET", "/ready", Reply(503, {"status": "not_ready", "reason": "initializing"}))
    readiness = await client.ready()
    assert not readiness.ready
    assert readiness.reason == "initializing"


async def test_archive_file_readers_turn_404_into_none(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("GET", "/api/v1/content/read", error(404, "NOT_FOUND", "File not found"))
    archive = "viking://user/alice/sessions/s1/history/archive_001"
    assert await client.read_memory_diff(TENANT, archive) is None
    assert await client.read_archive_done(TENANT, archive) is None
    assert await client.read_archive_failure(TENANT, archive) is None
    assert await client.read_archive_meta(TENANT, archive) is None
    uris = sorted(r.query for r in scripted.calls("GET", "/api/v1/content/read"))
    assert all("raw=true" in query for query in uris)
