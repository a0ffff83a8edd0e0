"""The query against the user's history: a name the user's exchanges never say alongside what is
asked leaves the query (real local OpenViking and the replica's exchange index), and the
refinement never leaves a query without content or touches anything but the words it drops
(property)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from contextengine.v1 import common_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.exchange_index import ExchangeIndex
from services.assembly.known_names import without_unrelated_names, without_words
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


def exchange(first: int, user_text: str, assistant_text: str) -> list[IndexedMessage]:
    return [
        IndexedMessage(first, text_message(common_pb2.MESSAGE_ROLE_USER, user_text)),
        IndexedMessage(first + 1, text_message(common_pb2.MESSAGE_ROLE_ASSISTANT, assistant_text)),
    ]


@pytest.mark.stack
async def test_a_name_never_said_alongside_what_is_asked_leaves_the_query(ov: OpenVikingClient) -> None:
    alice = Tenant(ACCOUNT, "alice")
    writer = TurnIndexWriter(ov, clock=lambda: SAID)
    for messages in (
        exchange(0, "Hey Gabi, great to see you!", "You too, Caro!"),
        exchange(2, "I bought a ukulele from Dana last week", "Nice, how does it sound?"),
        exchange(4, "Thanks for the chat, Gabi", "Anytime!"),
        exchange(6, "The ukulele needs new strings", "Dana will know where to get them."),
    ):
        await writer.add(alice, "s1", messages, deadline=None)
    index = ExchangeIndex(ov, refresh_seconds=3600)
    try:
        question = "Which ukulele did Caroline buy from Dana?"
        assert without_unrelated_names(question, index, alice).text == question  # not synced: unchanged
        await index.sync(alice)
        # Never said at all: out; said together with what is asked: stays.
        refined = without_unrelated_names(question, index, alice)
        assert (refined.text, refined.dropped) == ("Which ukulele did buy from Dana?", ("caroline",))
        # Said, but only in greetings, never with the ukulele: out.
        assert without_unrelated_names("Where does Gabi keep the ukulele?", index, alice).dropped == ("gabi",)
        # A name that is all the prompt asks about stays, said or not.
        assert without_unrelated_names("What did Gabi say?", index, alice).dropped == ()
        assert without_unrelated_names("Caroline?", index, alice).text == "Caroline?"
        assert without_unrelated_names(question, None, alice).text == question
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
