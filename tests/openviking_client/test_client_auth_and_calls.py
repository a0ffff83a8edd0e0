"""Per-call identity, header providers, batching and task polling over a real local server."""

from __future__ import annotations

import time

import pytest

from shared.errors import BackendTimeout, BackendUnauthenticated, InvalidArgument
from shared.openviking import (
    MAX_BATCH_MESSAGES,
    ApiKeyAuth,
    DevAuth,
    NewMessage,
    OpenVikingClient,
    ProvisioningUserKeys,
    StaticUserKeys,
    Tenant,
    TextPart,
    ToolPart,
    TrustedAuth,
)
from tests.openviking_client.conftest import TENANT
from tests.openviking_client.scripted_server import ScriptedServer, error, ok

BOB = Tenant("acme", "bob")
STATUS = "/api/v1/system/status"


async def test_dev_auth_sends_the_identity_of_each_call(scripted: ScriptedServer) -> None:
    scripted.script("GET", STATUS, ok({"initialized": True, "user": "x"}))
    async with OpenVikingClient(scripted.base_url, DevAuth()) as ov:
        await ov.system_status(TENANT)
        await ov.system_status(BOB)
    first, second = scripted.requests
    assert (first.headers["X-OpenViking-Account"], first.headers["X-OpenViking-User"]) == ("acme", "alice")
    assert second.headers["X-OpenViking-User"] == "bob"
    assert "X-API-Key" not in first.headers


async def test_trusted_auth_adds_the_root_key(scripted: ScriptedServer) -> None:
    scripted.script("GET", STATUS, ok({"initialized": True, "user": "alice"}))
    async with OpenVikingClient(scripted.base_url, TrustedAuth("root-secret")) as ov:
        await ov.system_status(TENANT)
    headers = scripted.requests[0].headers
    assert headers["X-API-Key"] == "root-secret"
    assert headers["X-OpenViking-User"] == "alice"


async def test_api_key_auth_sends_only_the_user_key(scripted: ScriptedServer) -> None:
    scripted.script("GET", STATUS, ok({"initialized": True, "user": "alice"}))
    auth = ApiKeyAuth(StaticUserKeys({TENANT: "alice-key"}))
    async with OpenVikingClient(scripted.base_url, auth) as ov:
        await ov.system_status(TENANT)
        with pytest.raises(BackendUnauthenticated):
            await ov.system_status(BOB)
    assert len(scripted.requests) == 1
    assert scripted.requests[0].headers["X-API-Key"] == "alice-key"
    assert "X-OpenViking-User" not in scripted.requests[0].headers


async def test_provisioning_keys_create_account_and_user_once_and_cache(scripted: ScriptedServer) -> None:
    scripted.script("POST", "/api/v1/admin/accounts", error(409, "ALREADY_EXISTS", "exists"))
    scripted.script(
        "POST",
        "/api/v1/admin/accounts/acme/users",
        ok({"account_id": "acme", "user_id": "alice", "user_key": "k-alice"}),
    )
    scripted.script("GET", STATUS, ok({"initialized": True, "user": "alice"}))
    keys = ProvisioningUserKeys(root_api_key="root", seed="shared-secret")
    async with OpenVikingClient(scripted.base_url, ApiKeyAuth(keys)) as ov:
        await ov.system_status(TENANT)
        await ov.system_status(TENANT)
    paths = [(r.method, r.path) for r in scripted.requests]
    assert paths == [
        ("POST", "/api/v1/admin/accounts"),
        ("POST", "/api/v1/admin/accounts/acme/users"),
        ("GET", STATUS),
        ("GET", STATUS),
    ]
    create_account, create_user = scripted.requests[0], scripted.requests[1]
    assert create_account.headers["X-API-Key"] == "root"
    assert create_user.body == {"user_id": "alice", "role": "user", "seed": keys.user_seed(TENANT)}
    assert scripted.requests[2].headers["X-API-Key"] == "k-alice"


async def test_provisioning_regenerates_with_the_same_seed_when_the_user_exists(
    scripted: ScriptedServer,
) -> None:
    scripted.script("POST", "/api/v1/admin/accounts", ok({"account_id": "acme", "user_key": "k-admin"}))
    scripted.script("POST", "/api/v1/admin/accounts/acme/users", error(409, "ALREADY_EXISTS", "exists"))
    scripted.script("POST", "/api/v1/admin/accounts/acme/users/alice/key", ok({"user_key": "k-alice"}))
    scripted.script("GET", STATUS, error(401, "UNAUTHENTICATED", "Invalid API key"), ok({"user": "alice"}))
    keys = ProvisioningUserKeys(root_api_key="root", seed="shared-secret")
    async with OpenVikingClient(scripted.base_url, ApiKeyAuth(keys)) as ov:
        with pytest.raises(BackendUnauthenticated):
            await ov.system_status(TENANT)  # a rejected key is forgotten...
        await ov.system_status(TENANT)  # ...and provisioned again
    regenerate = scripted.calls("POST", "/api/v1/admin/accounts/acme/users/alice/key")
    assert [r.body for r in regenerate] == [{"seed": keys.user_seed(TENANT)}] * 2


def test_user_seeds_are_deterministic_and_per_tenant() -> None:
    a = ProvisioningUserKeys(root_api_key="r1", seed="s")
    b = ProvisioningUserKeys(root_api_key="r2", seed="s")
    assert a.user_seed(TENANT) == b.user_seed(TENANT)
    assert a.user_seed(TENANT) != a.user_seed(BOB)
    assert ProvisioningUserKeys(root_api_key="r1", seed="t").user_seed(TENANT) != a.user_seed(TENANT)
    assert "r1" not in repr(a) and "'s'" not in repr(a)


def test_tenant_ids_are_validated() -> None:
    with pytest.raises(InvalidArgument):
        Tenant("acme", "a/b")
    with pytest.raises(InvalidArgument):
        Tenant("_sys", "alice")


async def test_header_providers_are_called_on_every_attempt(scripted: ScriptedServer) -> None:
    scripted.script("GET", STATUS, error(503, "UNAVAILABLE", "x"), ok({"user": "alice"}))
    counter = iter(range(100))
    async with OpenVikingClient(
        scripted.base_url,
        DevAuth(),
        header_providers=[lambda: {"X-Request-ID": f"r{next(counter)}", "traceparent": "00-abc-def-01"}],
    ) as ov:
        await ov.system_status(TENANT)
    assert [r.headers["X-Request-ID"] for r in scripted.requests] == ["r0", "r1"]
    assert scripted.requests[0].headers["traceparent"] == "00-abc-def-01"


async def test_batches_above_100_messages_are_split_in_order(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    path = "/api/v1/sessions/s1/messages/batch"
    scripted.script(
        "POST",
        path,
        ok({"session_id": "s1", "message_count": 100, "added": 100, "pending_tokens": 1}),
        ok({"session_id": "s1", "message_count": 200, "added": 100, "pending_tokens": 2}),
        ok({"session_id": "s1", "message_count": 250, "added": 50, "pending_tokens": 3}),
    )
    messages = [NewMessage(role="user", content=f"m{i}", source_message_ids=(f"id{i}",)) for i in range(250)]
    result = await client.add_messages(TENANT, "s1", messages)
    assert (result.added, result.message_count, result.pending_tokens) == (250, 250, 3)
    sizes = [len(r.body["messages"]) for r in scripted.calls("POST", path)]
    assert sizes == [MAX_BATCH_MESSAGES, MAX_BATCH_MESSAGES, 50]
    assert scripted.requests[2].body["messages"][-1] == {
        "role": "user",
        "content": "m249",
        "source_message_ids": ["id249"],
    }


async def test_message_parts_are_sent_as_the_api_takes_them(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("POST", "/api/v1/sessions/s1/messages", ok({"message_count": 1}))
    message = NewMessage(
        role="assistant",
        parts=(
            TextPart(text="calling"),
            ToolPart(
                tool_id="c1",
                tool_name="ls",
                tool_input={"path": "/"},
                tool_output="a b",
                tool_status="completed",
            ),
        ),
        turn_id="t1",
        message_kind="assistant_step",
        created_at="2026-01-01T00:00:00Z",
    )
    await client.add_message(TENANT, "s1", message)
    assert scripted.requests[0].body == {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "calling"},
            {
                "type": "tool",
                "tool_id": "c1",
                "tool_name": "ls",
                "tool_input": {"path": "/"},
                "tool_output": "a b",
                "tool_status": "completed",
            },
        ],
        "created_at": "2026-01-01T00:00:00Z",
        "turn_id": "t1",
        "message_kind": "assistant_step",
    }


def _task(status: str) -> dict[str, object]:
    return {"task_id": "t1", "task_type": "session_commit", "status": status, "resource_id": "s1"}


async def test_wait_for_task_polls_until_terminal(client: OpenVikingClient, scripted: ScriptedServer) -> None:
    scripted.script(
        "GET", "/api/v1/tasks/t1", ok(_task("running")), ok(_task("running")), ok(_task("completed"))
    )
    task = await client.wait_for_task(TENANT, "t1", time.monotonic() + 5)
    assert task.status == "completed" and task.is_terminal
    assert len(scripted.requests) == 3


async def test_wait_for_task_times_out_at_the_deadline(
    client: OpenVikingClient, scripted: ScriptedServer
) -> None:
    scripted.script("GET", "/api/v1/tasks/t1", ok(_task("running")))
    started = time.monotonic()
    with pytest.raises(BackendTimeout):
        await client.wait_for_task(TENANT, "t1", started + 0.5)
    assert time.monotonic() - started < 0.8
    assert 2 <= len(scripted.requests) <= 6


async def test_query_parameters_are_encoded(client: OpenVikingClient, scripted: ScriptedServer) -> None:
    scripted.script("GET", "/api/v1/sessions/a%20b/context", ok({"messages": []}))
    scripted.script("DELETE", "/api/v1/fs", ok({"uri": "u"}))
    await client.get_session_context(TENANT, "a b", token_budget=500)
    await client.rm(TENANT, "viking://~/memories/x", recursive=True)
    assert scripted.requests[0].query == "token_budget=500"
    assert scripted.requests[1].query == "uri=viking%3A%2F%2F~%2Fmemories%2Fx&recursive=true&wait=false"
