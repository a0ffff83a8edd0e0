"""The exchange index (the lexical leg's derived FTS5 index) against the real local OpenViking,
and its query building over any terms."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from contextengine.v1 import common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.exchange_index import ExchangeIndex, fts_query
from services.assembly.lexical import content_terms
from shared.domain.conversation import text_message
from shared.domain.stream_state import session_id_for
from shared.domain.turn_index import IndexedMessage, session_index_uri
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.errors import BackendConflict
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from shared.openviking.http import HttpRequest, HttpResponse, Send
from tests.support.stack import OpenVikingEndpoint

RUN = uuid.uuid4().hex[:8]
ACCOUNT = f"ce-xidx-{RUN}"
SAID = datetime(2026, 3, 4, 14, 5, tzinfo=UTC)


@given(st.lists(st.text(max_size=30), max_size=8))
def test_any_terms_make_a_query_fts5_accepts(terms: list[str]) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.execute("INSERT INTO t (body) VALUES ('inc-48213 is about the payments outage')")
    query = fts_query(terms)
    if query:
        db.execute("SELECT * FROM t WHERE t MATCH ?", (query,)).fetchall()  # no syntax error


def test_an_id_with_a_dash_matches_as_a_phrase() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.executemany("INSERT INTO t (body) VALUES (?)", [("ticket inc-48213 opened",), ("48213 inc",)])
    rows = db.execute("SELECT body FROM t WHERE t MATCH ?", (fts_query(["inc-48213"]),)).fetchall()
    assert rows == [("ticket inc-48213 opened",)]


def exchange(user_text: str, assistant_text: str, first: int) -> list[IndexedMessage]:
    return [
        IndexedMessage(first, text_message(common_pb2.MESSAGE_ROLE_USER, user_text)),
        IndexedMessage(first + 1, text_message(common_pb2.MESSAGE_ROLE_ASSISTANT, assistant_text)),
    ]


async def forget_session(ov: OpenVikingClient, tenant: Tenant, session_id: str) -> None:
    """`rm -r` of the session's folder, once OpenViking has finished processing its writes."""
    give_up = time.monotonic() + 30
    while True:
        try:
            await ov.rm(tenant, session_index_uri(session_id), recursive=True)
            return
        except BackendConflict:  # "Resource is being processed": the writes' vectors
            assert time.monotonic() < give_up
            await asyncio.sleep(0.5)


@pytest.fixture
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield client


@pytest.mark.stack
async def test_every_exchange_is_found_once_synced_and_changes_follow(ov: OpenVikingClient) -> None:
    alice, bob = Tenant(ACCOUNT, "alice"), Tenant(ACCOUNT, "bob")
    writer = TurnIndexWriter(ov, clock=lambda: SAID)
    chatter = [exchange(f"Nice weather today number {i}", "Indeed, lovely.", 2 * i) for i in range(30)]
    for messages in chatter:
        await writer.add(alice, "s-old", messages, deadline=None)
    await writer.add(alice, "s-old", exchange("My sister moved to Valparaiso in March", "Lovely.", 60))
    await writer.add(bob, "s-bob", exchange("Bob keeps a cockatiel called Nimbus", "Nice bird.", 0))

    index = ExchangeIndex(ov, refresh_seconds=0.0)
    try:
        assert index.search(alice, ["valparaiso"], 10) is None  # never synced: the caller falls back
        await index.sync(alice)
        hits = index.search(alice, content_terms("Where does my sister live, Valparaiso?"), 10)
        assert hits is not None and hits[0].uri.endswith("/ce-turns/s-old/0000060.md"), hits
        sister = hits[0]
        assert "Valparaiso" in (index.text(alice, sister) or "") and sister.score > 0
        assert index.search(alice, ["nimbus"], 10) == []  # bob's exchange is not alice's

        # A new session folder and a forgotten one: the next sync follows both.
        await writer.add(alice, "s-new", exchange("I adopted a beagle called Biscuit", "Congrats!", 0))
        await forget_session(ov, alice, "s-old")

        give_up = time.monotonic() + 30
        while True:
            await index.sync(alice)
            found = index.search(alice, ["biscuit", "valparaiso"], 10) or []
            if [h.uri.rsplit("/", 2)[-2] for h in found] == ["s-new"]:
                break
            assert time.monotonic() < give_up, found
            await asyncio.sleep(0.5)
        assert index.text(alice, sister) is None  # its session was forgotten: no stale text
        assert "Biscuit" in (index.text(alice, found[0]) or "")
    finally:
        await index.aclose()


@pytest.mark.stack
async def test_the_least_recently_searched_user_is_dropped(ov: OpenVikingClient) -> None:
    writer = TurnIndexWriter(ov, clock=lambda: SAID)
    users = [Tenant(ACCOUNT, f"lru-{i}") for i in range(3)]
    for user in users:
        await writer.add(user, "s1", exchange(f"{user.user_id} likes kayaking", "Fun.", 0))
    index = ExchangeIndex(ov, refresh_seconds=3600, max_users=2)
    try:
        for user in users:
            await index.sync(user)
        assert index.search(users[2], ["kayaking"], 5) is not None
        assert index.search(users[0], ["kayaking"], 5) is None  # dropped: rebuilt on demand
    finally:
        await index.aclose()


@pytest.mark.stack
async def test_the_listing_vouches_for_its_streams_only_while_fresh_and_unchanged(
    ov: OpenVikingClient,
) -> None:
    tenant = Tenant(ACCOUNT, "listing")
    session = session_id_for("stream-a", 3)
    await TurnIndexWriter(ov, clock=lambda: SAID).add(tenant, session, exchange("Hello", "Hi.", 0))
    now = [100.0]
    index = ExchangeIndex(ov, refresh_seconds=3600, clock=lambda: now[0])
    try:
        assert index.streams_listed(tenant, 30) is None  # never listed
        await index.sync(tenant)
        listed = index.streams_listed(tenant, 30)
        assert listed is not None and set(listed) == {"stream-a"}
        now[0] += 31
        assert index.streams_listed(tenant, 30) is None  # too old to vouch for
        await index.sync(tenant)
        assert index.streams_listed(tenant, 30) is not None
        index.forget_listing(tenant)  # a change announced since the listing
        assert index.streams_listed(tenant, 30) is None
        now[0] += 1
        await index.sync(tenant)
        assert index.streams_listed(tenant, 30) is not None
        assert index.streams_listed(Tenant(ACCOUNT, "nobody"), 30) is None
    finally:
        await index.aclose()


@pytest.mark.stack
async def test_the_next_sync_starts_when_the_listing_is_old_however_long_the_last_one_took(
    openviking: OpenVikingEndpoint,
) -> None:
    now = [100.0]
    listed = asyncio.Event()

    async def slow_greps(request: HttpRequest, send: Send) -> HttpResponse:
        if request.path.endswith("/search/grep"):
            now[0] += 20  # each folder's grep takes 20 s of the index's clock
        response = await send(request)
        if request.path.endswith("/fs/ls"):
            listed.set()
        return response

    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[slow_greps]) as ov:
        tenant = Tenant(ACCOUNT, f"slow-{uuid.uuid4().hex[:6]}")
        session = session_id_for("stream-b", 0)
        await TurnIndexWriter(ov, clock=lambda: SAID).add(tenant, session, exchange("Hello", "Hi.", 0))
        index = ExchangeIndex(ov, refresh_seconds=30, clock=lambda: now[0])
        try:
            await index.sync(tenant)  # listed at 100, done at 120
            now[0] = 131  # the listing is 31 s old, the sync ended 11 s ago
            assert index.streams_listed(tenant, 30) is None
            listed.clear()
            assert index.search(tenant, ["hello"], 5) is not None
            async with asyncio.timeout(30):
                await listed.wait()  # the search started the next sync
            await index.sync(tenant)  # (waits for the running one)
            assert set(index.streams_listed(tenant, 30) or ()) == {"stream-b"}
        finally:
            await index.aclose()
