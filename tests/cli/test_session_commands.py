"""The CLI's session and user-data commands against a real engine, as a person would run them."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest
from contextengine_client import ContextEngine, Conversation, identity

from tests.support.stack import OpenVikingEndpoint

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.stack


async def cli(base_url: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shared.cli", *args,
        cwd=REPO, env={"CONTEXT_ENGINE_BASE_URL": base_url, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=180)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_users_session_seen_exported_and_deleted(
    openviking: OpenVikingEndpoint, engine_address: str
) -> None:
    user = f"cli-{uuid.uuid4().hex[:8]}"
    who = ["--account", "acme", "--user", user]
    async with ContextEngine.connect(engine_address) as engine:
        talk = Conversation(engine, identity("acme", user, "s1"))
        await talk.assemble("The staging database for Orion lives in Frankfurt.")
        await talk.after_turn("Noted: Orion staging is in Frankfurt.")
        compacted = await engine.compact(identity("acme", user, "s1"), force=True)
    assert compacted.checkpoint.checkpoint_id
    grpc_args = ["--target", engine_address, *who]

    code, out, err = await cli(openviking.base_url, "inspect", *who, "--session", "s1")
    assert code == 0, err
    assert "last sequence 1" in out
    assert "checkpoints: 1" in out
    # the turn's range waits in the ledger until this replica's next claim of the stream says it is indexed
    assert "claimed ranges not yet confirmed 0-1" in out

    code, out, err = await cli(openviking.base_url, "checkpoints", *grpc_args, "--session", "s1")
    assert code == 0, err
    assert compacted.checkpoint.checkpoint_id in out

    code, out, err = await cli(
        openviking.base_url, "expand", *grpc_args, "--session", "s1", compacted.checkpoint.checkpoint_id
    )
    assert code == 0, err
    assert "Frankfurt" in out

    for _ in range(20):  # the turn index is findable a moment after AfterTurn
        code, out, err = await cli(
            openviking.base_url, "assemble", *grpc_args, "--session", "s2", "Where is Orion staging?"
        )
        assert code == 0, err
        if " turn " in out:
            break
        await asyncio.sleep(0.5)
    assert "Frankfurt" in out

    code, out, err = await cli(openviking.base_url, "export-user", *who)
    assert code == 0, err
    exported = [json.loads(line) for line in out.splitlines()]
    assert any("Frankfurt" in row["content"] for row in exported)
    assert any(".contextengine" in row["uri"] for row in exported)  # the engine's state goes too

    code, out, err = await cli(openviking.base_url, "delete-user", *who)
    assert code == 0, err
    assert out.startswith("would delete (run again with --yes): session ")
    code, out, err = await cli(openviking.base_url, "delete-user", *who, "--yes")
    assert code == 0, err
    assert out.startswith("deleted: ")
    code, out, err = await cli(openviking.base_url, "export-user", *who)
    assert code == 0, err
    assert "Frankfurt" not in out


async def test_a_bad_request_is_one_error_line(openviking: OpenVikingEndpoint, engine_address: str) -> None:
    code, _, err = await cli(
        openviking.base_url, "assemble", "--target", engine_address, "--user", "a b", "--session", "s", "hi"
    )
    assert code == 1
    assert err.strip().splitlines() == [err.strip()]
    assert err.startswith("error: INVALID_ARGUMENT: identity.user_id")
