"""SIGTERM to a real engine process commits every stream with uncommitted turns before exit."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path

import grpc
import pytest
from contextengine.v1 import capture_pb2, capture_pb2_grpc, checkpoint_pb2, common_pb2

from shared.config import load_settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.documents import DocumentStore
from shared.domain.identity import request_identity
from shared.domain.stream_state import StreamStateStore
from shared.runtime.context import build_openviking_client
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack
REPO = Path(__file__).resolve().parents[2]


def _turn(text: str, msg_id: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        id=msg_id,
        role=common_pb2.MESSAGE_ROLE_USER,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
    )


async def test_sigterm_flushes_pending_sessions(openviking: OpenVikingEndpoint) -> None:
    env = {
        **os.environ,
        "CONTEXT_ENGINE_BASE_URL": openviking.base_url,
        "CONTEXT_ENGINE_SHUTDOWN_GRACE_SECONDS": "20",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shared.runtime.main",
        "--service",
        "all",
        "--port",
        "0",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    identities = [
        common_pb2.Identity(
            account_id="flush", user_id=f"u-{uuid.uuid4().hex[:8]}", agent_id="main", session_id=f"s{i}"
        )
        for i in range(2)
    ]
    try:
        assert process.stdout is not None
        address = (await process.stdout.readline()).decode().rsplit(" ", 1)[-1].strip()
        async with grpc.aio.insecure_channel(address) as channel:
            capture = capture_pb2_grpc.CaptureServiceStub(channel)
            for identity in identities:
                reply = await capture.AfterTurn(
                    capture_pb2.AfterTurnRequest(
                        identity=identity, messages=[_turn("remember the blue deploy", "u0")]
                    )
                )
                assert reply.persisted_count == 1
                assert reply.trigger_fired == checkpoint_pb2.COMPACTION_TRIGGER_UNSPECIFIED
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 60) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    async with build_openviking_client(settings) as ov:
        documents = DocumentStore(ov)
        for proto in identities:
            identity = request_identity(proto, settings, session_required=True)
            state = await StreamStateStore(documents).load(identity)
            assert state is not None
            assert state.generation == 1, "the stream moved its turns into a committed session"
            assert len(state.checkpoint_ids) == 1
            checkpoint = await CheckpointStore(documents).read(identity.tenant, state.checkpoint_ids[0])
            assert checkpoint is not None
            assert checkpoint.trigger == checkpoint_pb2.COMPACTION_TRIGGER_FLUSH
            assert checkpoint.archive_uri, "OpenViking accepted the commit before the process exited"
