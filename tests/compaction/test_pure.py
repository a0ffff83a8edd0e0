"""Pure logic: references, checkpoint documents <-> protos, ranking."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from contextengine.v1 import checkpoint_pb2

from services.compaction.expand import overlap_score, parse_reference, words
from shared.domain.archives import archive_index_of
from shared.domain.checkpoints import (
    CheckpointRecord,
    from_proto,
    is_checkpoint_id,
    new_checkpoint_id,
    provenance_uri,
    stream_of_checkpoint,
    to_proto,
)
from shared.errors import InvalidArgument, NotFound, PermissionDenied
from shared.openviking import Tenant

ME = Tenant("acme", "carol")
STREAM = "0123456789abcdef0123"


def test_checkpoint_ids_embed_their_stream() -> None:
    checkpoint_id = new_checkpoint_id(STREAM)
    assert is_checkpoint_id(checkpoint_id)
    assert stream_of_checkpoint(checkpoint_id) == STREAM
    assert stream_of_checkpoint("cp-nope") is None


def test_checkpoint_round_trips_through_the_proto() -> None:
    record = CheckpointRecord(
        checkpoint_id=new_checkpoint_id(STREAM),
        stream_id=STREAM,
        session_id="ce-x-g0001",
        host_session_id="host",
        agent_id="main",
        status=checkpoint_pb2.CHECKPOINT_STATUS_COMPLETED,
        trigger=checkpoint_pb2.COMPACTION_TRIGGER_BUDGET,
        committed_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        finished_at=datetime(2026, 1, 2, 3, 4, 9, tzinfo=UTC),
        archive_uri="viking://user/carol/sessions/ce-x-g0001/history/archive_002",
        archive_index=2,
        task_id="t-1",
        start_sequence=0,
        end_sequence=9,
        summary_uri="viking://user/carol/sessions/ce-x-g0001/history/archive_002",
        extracted_memory_uris=["viking://user/carol/memories/preferences/carol/tabs.md"],
        origin_traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    proto = to_proto(record)
    assert proto.source_turn_range.end_sequence == 9
    back = from_proto(proto, STREAM)
    assert to_proto(back) == proto
    assert back.committed_at == record.committed_at


def test_archive_index_and_provenance_uri() -> None:
    assert archive_index_of("viking://user/u/sessions/s/history/archive_013/") == 13
    assert archive_index_of("viking://user/u/sessions/s") == 0
    uri = provenance_uri("viking://user/carol/memories/preferences/carol/tabs.md")
    assert uri.startswith("viking://~/resources/.contextengine/provenance/") and uri.endswith(".json")


@pytest.mark.parametrize(
    ("raw", "kind", "canonical"),
    [
        (
            "viking://~/memories/preferences/carol/tabs.md",
            "memory",
            "viking://user/carol/memories/preferences/carol/tabs.md",
        ),
        (
            "viking://user/carol/peers/bob/memories/x.md",
            "memory",
            "viking://user/carol/peers/bob/memories/x.md",
        ),
        (
            "viking://session/s-1/history/archive_001",
            "archive",
            "viking://user/carol/sessions/s-1/history/archive_001",
        ),
        ("viking://user/carol/sessions/s-1/", "session", "viking://user/carol/sessions/s-1"),
    ],
)
def test_references_are_canonicalised(raw: str, kind: str, canonical: str) -> None:
    ref = parse_reference(raw, ME)
    assert (ref.kind, ref.uri) == (kind, canonical)


def test_reference_errors() -> None:
    with pytest.raises(InvalidArgument, match="summary_or_memory_uri"):
        parse_reference("http://x", ME)
    with pytest.raises(InvalidArgument):
        parse_reference("viking://user/carol//memories", ME)
    with pytest.raises(PermissionDenied):
        parse_reference("viking://user/dave/memories/x.md", ME)
    with pytest.raises(NotFound):
        parse_reference("viking://resources/docs/readme.md", ME)


def test_overlap_ranks_by_shared_words() -> None:
    query = words("Which port does the invoice service use?")
    assert overlap_score(query, "The invoice service runs on port 8443.") > overlap_score(
        query, "Deploys happen on Tuesdays."
    )
    assert overlap_score(set(), "anything") == 0.0
