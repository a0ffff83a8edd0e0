"""The query against the user's history: a name no exchange of the user mentions leaves the query
(real local OpenViking and the replica's exchange index), and the refinement never leaves a query
without content or touches anything but unknown names (property)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from contextengine.v1 import common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.exchange_index import ExchangeIndex
from services.assembly.known_names import without_unknown_names, without_words
from services.assembly.lexical import tokens
from shared.domain.conversation import text_message
from shared.domain.turn_index import IndexedMessage
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from tests.support.stack import OpenVikingEndpoint

ACCOUNT = f"ce-names-{uuid.uuid4().hex[:8]}"
SAID = datetime(2026, 3, 4, 14, 5, tzinfo=UTC)


@pytest.fixture
async def ov(openviking: OpenVikingEndpoint) -> AsyncIterator[OpenVikingClient]:
    async with OpenVikingClient(openviking.base_url, DevAuth()) as client:
        yield client


@pytest.mark.stack
async def test_a_name_the_history_never_mentions_leaves_the_query(ov: OpenVikingClient) -> None:
    alice = Tenant(ACCOUNT, "alice")
    said = [
        IndexedMessage(0, text_message(common_pb2.MESSAGE_ROLE_USER, "Caro bought a ukulele from Dana")),
        IndexedMessage(1, text_message(common_pb2.MESSAGE_ROLE_ASSISTANT, "Nice, Caro!")),
    ]
    await TurnIndexWriter(ov, clock=lambda: SAID).add(alice, "s1", said, deadline=None)
    index = ExchangeIndex(ov, refresh_seconds=3600)
    try:
        question = "Which instrument did Caroline buy from Dana?"
        assert without_unknown_names(question, index, alice).text == question  # not synced: unchanged
        await index.sync(alice)
        refined = without_unknown_names(question, index, alice)
        assert refined.text == "Which instrument did buy from Dana?"
        assert refined.dropped == ("caroline",)
        # Only names: a common word the history never used stays (it carries meaning).
        assert without_unknown_names("Which instruments did Caro buy?", index, alice).dropped == ()
        # A query that would be left with no content keeps its names.
        assert without_unknown_names("Caroline?", index, alice).text == "Caroline?"
        assert without_unknown_names(question, None, alice).text == question
    finally:
        await index.aclose()


WORDS = st.sampled_from(["Which", "book", "did", "Caroline", "Mel", "read", "Blue-Fox", "in", "Paris", "?"])


UNKNOWN = st.sets(st.sampled_from(["caroline", "mel", "blue", "fox", "paris", "zed"]))


@given(st.lists(WORDS, min_size=1, max_size=10).map(" ".join), UNKNOWN)
def test_only_the_unknown_words_go_and_some_content_always_stays(query: str, unknown: set[str]) -> None:
    refined = without_words(query, frozenset(unknown))
    kept = tokens(refined.text)
    assert set(refined.dropped) <= unknown & set(tokens(query))
    assert not set(refined.dropped) & set(kept)
    if tokens(query):
        assert kept  # never a query without content
    if refined.dropped:  # every word without a dropped token stays, in order
        assert refined.text.split() == [w for w in query.split() if not set(tokens(w)) & set(refined.dropped)]
    else:
        assert refined.text == query
