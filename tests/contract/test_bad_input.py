"""Bad input is refused by name: every case of the corpus gets INVALID_ARGUMENT, NOT_FOUND or
PERMISSION_DENIED whose message starts with the offending field, carries no stack trace, and
leaves the tenant's data in OpenViking exactly as it was (real services, real OpenViking)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest

from shared.errors import BackendNotFound
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from tests.contract.corpus import (
    ACCOUNT,
    IDENTITY_CASES,
    MESSAGE_CASES,
    VICTIM,
    Case,
    Role,
    after_turn,
    store,
    text,
)
from tests.contract.corpus_calls import ASSEMBLY_CASES, CHECKPOINT_CASES, MEMORY_CASES
from tests.e2e.host import Stubs
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

CASES: dict[str, Case] = {
    **IDENTITY_CASES,
    **MESSAGE_CASES,
    **MEMORY_CASES,
    **CHECKPOINT_CASES,
    **ASSEMBLY_CASES,
}


INDEX_SECONDS = 15.0
"""Bound on waiting for the victim's good turn to be indexed."""


async def snapshot(ov: OpenVikingClient) -> dict[str, object]:
    """Every file of the victim (and of the same user id in account `default`) with its size."""
    state: dict[str, object] = {}
    for tenant in (Tenant(ACCOUNT, VICTIM.user_id), Tenant("default", VICTIM.user_id)):
        try:
            listing = await ov.ls(
                tenant,
                f"viking://user/{tenant.user_id}",
                recursive=True,
                show_all_hidden=True,
                node_limit=10_000,
            )
        except BackendNotFound:
            state[tenant.account_id] = None
            continue
        state[tenant.account_id] = sorted((e.uri, e.size) for e in listing.entries)
    return state


@pytest.fixture(scope="module")
async def victim(contract_engine: Stubs, openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    await contract_engine.capture.AfterTurn(
        after_turn(
            text("I keep the spare keys under the blue pot"), text("Noted.", Role.MESSAGE_ROLE_ASSISTANT)
        ),
        timeout=120,
    )
    await contract_engine.capture.StoreMemory(store(text="The victim's locker number is 4711"), timeout=120)
    async with OpenVikingClient(openviking.base_url, DevAuth()) as ov:
        await at_rest(ov)
        yield ov


async def at_rest(ov: OpenVikingClient) -> None:
    """Until the victim's good turn is in the turn index (capture writes it after its batch
    window): the snapshots compared below then change only if a bad call changed them."""
    give_up = time.monotonic() + INDEX_SECONDS
    while True:
        files = (await snapshot(ov))[ACCOUNT]
        if isinstance(files, list) and any("/ce-turns/" in uri and uri.endswith(".md") for uri, _ in files):
            return
        assert time.monotonic() < give_up, "the victim's turn was never indexed"
        await asyncio.sleep(0.2)


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_input_is_refused_by_name(
    name: str, contract_engine: Stubs, victim: OpenVikingClient
) -> None:
    case = CASES[name]
    service, method = case.rpc.split(".")
    before = await snapshot(victim)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await getattr(getattr(contract_engine, service), method)(case.request, timeout=120)
    error = caught.value
    details = error.details() or ""
    assert error.code().name == case.code, (error.code(), details)
    assert details.startswith(f"{case.field}:"), details
    assert "Traceback" not in details and 'File "' not in details and len(details) < 600, details
    assert "\x00" not in details
    assert await snapshot(victim) == before, "the tenant's data changed"
