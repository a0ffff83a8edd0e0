"""The cached profile against the real local OpenViking: StoreMemory, ForgetMemory and a commit
in the same process show at once; a replica in another process keeps its copy for the TTL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)
from grpc import aio

from services.assembly import build_assembly_service
from services.capture import build_capture_service
from services.compaction import build_compaction_service
from shared.config import Settings, load_settings
from shared.openviking.tenant import Tenant
from shared.runtime.context import ServiceContext, build_openviking_client
from shared.runtime.server import ServiceHost
from tests.assembly.helpers import assistant, user
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

ACCOUNT = f"ce-prof-{uuid.uuid4().hex[:8]}"
PREFERENCE = "Dana takes her flat white with oat milk, never dairy."


@dataclass
class Process:
    """One engine process: its services share one `ServiceContext` (and its memory changes)."""

    context: ServiceContext
    channel: aio.Channel
    capture: capture_pb2_grpc.CaptureServiceStub
    assembly: assembly_pb2_grpc.AssemblyServiceStub
    compaction: compaction_pb2_grpc.CompactionServiceStub


def settings_for(base_url: str) -> Settings:
    return load_settings(
        environ={},
        overrides={"baseUrl": base_url, "grpcPort": 0, "shutdownGraceSeconds": 1, "timeoutMs": 60_000},
    )


@pytest.fixture
async def processes(openviking: OpenVikingEndpoint) -> AsyncIterator[tuple[Process, Process]]:
    """Two processes' worth of services (each all-in-one) over the same OpenViking."""
    hosts: list[ServiceHost] = []
    started: list[Process] = []
    for _ in range(2):
        settings = settings_for(openviking.base_url)
        client = build_openviking_client(settings)
        host_ref: list[ServiceHost] = []
        context = ServiceContext(
            settings=settings, openviking=client, compaction_target=lambda ref=host_ref: ref[0].address
        )
        specs = [
            build_capture_service(context),
            build_compaction_service(context),
            build_assembly_service(context),
        ]
        host = ServiceHost(settings, specs, closers=[client.aclose])
        host_ref.append(host)
        await host.start(0)
        hosts.append(host)
        channel = aio.insecure_channel(host.address)
        started.append(
            Process(
                context,
                channel,
                capture_pb2_grpc.CaptureServiceStub(channel),
                assembly_pb2_grpc.AssemblyServiceStub(channel),
                compaction_pb2_grpc.CompactionServiceStub(channel),
            )
        )
    try:
        yield started[0], started[1]
    finally:
        for process in started:
            await process.channel.close()
        for host in hosts:
            await host.stop()


def identity(user_id: str, session: str = "s1") -> common_pb2.Identity:
    return common_pb2.Identity(account_id=ACCOUNT, user_id=user_id, agent_id="main", session_id=session)


async def profile_of(process: Process, user_id: str) -> str:
    got = await process.assembly.Assemble(
        assembly_pb2.AssembleRequest(
            identity=identity(user_id),
            messages=[user("what should I order at the cafe this morning?")],
            token_budget=4000,
        )
    )
    return got.system_prompt_addition


async def test_store_and_forget_show_at_once_in_the_same_process_and_after_the_ttl_elsewhere(
    processes: tuple[Process, Process],
) -> None:
    here, elsewhere = processes
    user_id = f"dana-{uuid.uuid4().hex[:6]}"
    assert PREFERENCE not in await profile_of(here, user_id)
    assert PREFERENCE not in await profile_of(elsewhere, user_id)  # both replicas now cache it

    stored = await here.capture.StoreMemory(
        capture_pb2.StoreMemoryRequest(identity=identity(user_id), text=PREFERENCE, category="preferences")
    )
    assert PREFERENCE in await profile_of(here, user_id)
    # The other process heard nothing: it shows its cached profile until the TTL runs out.
    assert PREFERENCE not in await profile_of(elsewhere, user_id)

    await here.capture.ForgetMemory(
        capture_pb2.ForgetMemoryRequest(identity=identity(user_id), uri=stored.uri)
    )
    assert PREFERENCE not in await profile_of(here, user_id)


async def test_a_commit_announces_the_tenant(processes: tuple[Process, Process]) -> None:
    here, _ = processes
    user_id = f"erin-{uuid.uuid4().hex[:6]}"
    heard: list[Tenant] = []
    here.context.in_process.memory_changes.subscribe(heard.append)
    await here.capture.AfterTurn(
        capture_pb2.AfterTurnRequest(
            identity=identity(user_id),
            messages=[user("remember that I deploy on Fridays"), assistant("Noted: Friday deploys.")],
            pre_prompt_message_count=0,
        )
    )
    compacted = await here.compaction.Compact(
        compaction_pb2.CompactRequest(identity=identity(user_id), force=True, token_budget=1000)
    )
    assert compacted.compacted
    assert Tenant(ACCOUNT, user_id) in heard
