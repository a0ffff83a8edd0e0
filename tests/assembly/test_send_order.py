"""The order an Assemble's retrieval reaches OpenViking in (`services.assembly.send_order`), on
the real local OpenViking with a synced exchange index: recall's `find` first, the stream
state's and the profile's reads next, and only then the replica's own CPU work (the exchange
index's search), so the reads land while the query is being embedded, not during the `find`'s
vector search."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import pytest
from contextengine.v1 import common_pb2

from services.assembly.exchange_index import ExchangeIndex, IndexedExchange
from services.assembly.profile import profile_cache
from services.assembly.recall_query import RecallQuery
from services.assembly.retrieval import Retrieval
from services.assembly.summaries import CheckpointSummaries, stream_checkpoints
from shared.config import load_settings
from shared.domain.checkpoints import CheckpointStore
from shared.domain.conversation import text_message
from shared.domain.documents import DocumentStore
from shared.domain.identity import request_identity
from shared.domain.stream_state import StreamStateStore
from shared.domain.turn_index import IndexedMessage
from shared.domain.turn_index_writer import TurnIndexWriter
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from shared.tokens import TokenCounter
from tests.assembly.helpers import RequestRecorder
from tests.support.stack import OpenVikingEndpoint

ACCOUNT = f"ce-order-{uuid.uuid4().hex[:8]}"
STATE_READ = ("GET", "/api/v1/content/read", "viking://~/resources/.contextengine/")


class NotedIndex(ExchangeIndex):
    """The real exchange index, noting how many requests `recorder` had seen when a search ran."""

    def __init__(self, source: OpenVikingClient, recorder: RequestRecorder) -> None:
        super().__init__(source, refresh_seconds=3600)
        self._recorder = recorder
        self.searched_after: list[int] = []

    def search(self, tenant: Tenant, terms: Sequence[str], limit: int) -> list[IndexedExchange] | None:
        self.searched_after.append(len(self._recorder.requests))
        return super().search(tenant, terms, limit)


@pytest.mark.stack
async def test_the_reads_go_out_after_the_find_and_before_the_exchange_index_is_searched(
    openviking: OpenVikingEndpoint,
) -> None:
    settings = load_settings(environ={}, overrides={"baseUrl": openviking.base_url})
    who = common_pb2.Identity(account_id=ACCOUNT, user_id="ana", agent_id="main", session_id="new-one")
    identity = request_identity(who, settings, session_required=True)
    recorder = RequestRecorder()
    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[recorder]) as client:
        writer = TurnIndexWriter(client)
        said = [
            IndexedMessage(0, text_message(common_pb2.MESSAGE_ROLE_USER, "I bought a ukulele from Dana")),
            IndexedMessage(1, text_message(common_pb2.MESSAGE_ROLE_ASSISTANT, "How does it sound?")),
        ]
        await writer.add(identity.tenant, "earlier", said, deadline=None)
        index = NotedIndex(client, recorder)
        documents = DocumentStore(client)
        summaries = CheckpointSummaries(
            CheckpointStore(documents), stream_checkpoints(StreamStateStore(documents))
        )
        try:
            await index.sync(identity.tenant)
            recorder.requests.clear()
            retrieval = Retrieval.start(
                client,
                summaries,
                settings,
                identity,
                RecallQuery("Which ukulele did I buy?", ""),
                counter=TokenCounter.for_model("", settings.default_encoding),
                budget=4000,
                deadline=time.monotonic() + 30,
                profiles=profile_cache(),
                exchanges=index,
            )
            retrieved = await retrieval.collect()
            assert retrieved.recall is not None
            recalled = [item.content for item in retrieved.recall.items]
        finally:
            await index.aclose()
    sent = recorder.requests
    assert (sent[0].method, sent[0].path) == ("POST", "/api/v1/search/find")
    before_search = sent[1 : index.searched_after[0]]
    # The new session's stream state (its summaries) was asked for before the search.
    method, path, root = STATE_READ
    assert any((r.method, r.path) == (method, path) and r.uri.startswith(root) for r in before_search), sent
    assert any("ukulele" in content for content in recalled)
