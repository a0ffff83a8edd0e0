"""The bad-input corpus: memory, expand, checkpoint and assembly calls."""

from __future__ import annotations

from contextengine.v1 import assembly_pb2, capture_pb2, compaction_pb2

from tests.contract.corpus import ARGS, UNKNOWN_CHECKPOINT, VICTIM, Case, call, expand, ident, store, text

MEMORY_CASES: dict[str, Case] = {
    "empty memory text": Case("capture.StoreMemory", store(text=""), "INVALID_ARGUMENT", "text"),
    "blank memory text": Case("capture.StoreMemory", store(text=" \n\t "), "INVALID_ARGUMENT", "text"),
    "memory text too long": Case("capture.StoreMemory", store(text="x" * 20_001), "INVALID_ARGUMENT", "text"),
    "category with punctuation": Case(
        "capture.StoreMemory", store(category="Prefs!"), "INVALID_ARGUMENT", "category"
    ),
    "category traversal": Case("capture.StoreMemory", store(category="../x"), "INVALID_ARGUMENT", "category"),
    "category of the engine's turn index": Case(
        "capture.StoreMemory", store(category="ce-turns"), "INVALID_ARGUMENT", "category"
    ),
    "scope 77": Case("capture.StoreMemory", store(scope=77), "INVALID_ARGUMENT", "scope"),
    "scope -1": Case("capture.StoreMemory", store(scope=-1), "INVALID_ARGUMENT", "scope"),
    "forget without target": Case(
        "capture.ForgetMemory", capture_pb2.ForgetMemoryRequest(identity=VICTIM), "INVALID_ARGUMENT", "target"
    ),
    "forget another user's memory": Case(
        "capture.ForgetMemory",
        capture_pb2.ForgetMemoryRequest(identity=VICTIM, uri="viking://user/other/memories/notes/x.md"),
        "PERMISSION_DENIED",
        "uri",
    ),
    "forget uri with NUL": Case(
        "capture.ForgetMemory",
        capture_pb2.ForgetMemoryRequest(identity=VICTIM, uri="viking://~/memories/notes/x\x00.md"),
        "INVALID_ARGUMENT",
        "uri",
    ),
    "forget uri traversal": Case(
        "capture.ForgetMemory",
        capture_pb2.ForgetMemoryRequest(identity=VICTIM, uri="viking://~/memories/../resources/x.md"),
        "INVALID_ARGUMENT",
        "uri",
    ),
    "forget a session": Case(
        "capture.ForgetMemory",
        capture_pb2.ForgetMemoryRequest(identity=VICTIM, uri="viking://resources/x.md"),
        "INVALID_ARGUMENT",
        "uri",
    ),
    "forget empty query": Case(
        "capture.ForgetMemory",
        capture_pb2.ForgetMemoryRequest(identity=VICTIM, query=" "),
        "INVALID_ARGUMENT",
        "query",
    ),
}

CHECKPOINT_CASES: dict[str, Case] = {
    "expand empty reference": Case(
        "compaction.ExpandMemory", expand(""), "INVALID_ARGUMENT", "summary_or_memory_uri"
    ),
    "expand reference with NUL": Case(
        "compaction.ExpandMemory",
        expand("viking://~/sessions/s\x00"),
        "INVALID_ARGUMENT",
        "summary_or_memory_uri",
    ),
    "expand not a uri": Case(
        "compaction.ExpandMemory", expand("hello"), "INVALID_ARGUMENT", "summary_or_memory_uri"
    ),
    "expand traversal": Case(
        "compaction.ExpandMemory",
        expand("viking://user/victim/../other/memories/x.md"),
        "INVALID_ARGUMENT",
        "summary_or_memory_uri",
    ),
    "expand another user": Case(
        "compaction.ExpandMemory",
        expand("viking://user/other/sessions/s1"),
        "PERMISSION_DENIED",
        "summary_or_memory_uri",
    ),
    "expand unknown checkpoint": Case(
        "compaction.ExpandMemory", expand(UNKNOWN_CHECKPOINT), "NOT_FOUND", "summary_or_memory_uri"
    ),
    "expand a resource": Case(
        "compaction.ExpandMemory", expand("viking://resources/doc.md"), "NOT_FOUND", "summary_or_memory_uri"
    ),
    "expand negative limit": Case(
        "compaction.ExpandMemory", expand(UNKNOWN_CHECKPOINT, limit=-1), "INVALID_ARGUMENT", "limit"
    ),
    "expand foreign page token": Case(
        "compaction.ExpandMemory",
        expand(UNKNOWN_CHECKPOINT, page_token="zz"),
        "INVALID_ARGUMENT",
        "page_token",
    ),
    "compact negative budget": Case(
        "compaction.Compact",
        compaction_pb2.CompactRequest(identity=VICTIM, token_budget=-1),
        "INVALID_ARGUMENT",
        "token_budget",
    ),
    "compact trigger 77": Case(
        "compaction.Compact",
        compaction_pb2.CompactRequest(
            identity=VICTIM,
            trigger=77,  # type: ignore[arg-type]
            force=True,
        ),
        "INVALID_ARGUMENT",
        "trigger",
    ),
    "compact negative token count": Case(
        "compaction.Compact",
        compaction_pb2.CompactRequest(identity=VICTIM, current_token_count=-5),
        "INVALID_ARGUMENT",
        "current_token_count",
    ),
    "checkpoint id empty": Case(
        "compaction.GetCheckpoint",
        compaction_pb2.GetCheckpointRequest(identity=VICTIM),
        "INVALID_ARGUMENT",
        "checkpoint_id",
    ),
    "checkpoint id malformed": Case(
        "compaction.GetCheckpoint",
        compaction_pb2.GetCheckpointRequest(identity=VICTIM, checkpoint_id="nope"),
        "INVALID_ARGUMENT",
        "checkpoint_id",
    ),
    "checkpoint unknown": Case(
        "compaction.GetCheckpoint",
        compaction_pb2.GetCheckpointRequest(identity=VICTIM, checkpoint_id=UNKNOWN_CHECKPOINT),
        "NOT_FOUND",
        "checkpoint_id",
    ),
    "list negative page size": Case(
        "compaction.ListCheckpoints",
        compaction_pb2.ListCheckpointsRequest(identity=VICTIM, page_size=-1),
        "INVALID_ARGUMENT",
        "page_size",
    ),
    "list huge page size": Case(
        "compaction.ListCheckpoints",
        compaction_pb2.ListCheckpointsRequest(identity=VICTIM, page_size=101),
        "INVALID_ARGUMENT",
        "page_size",
    ),
    "list foreign page token": Case(
        "compaction.ListCheckpoints",
        compaction_pb2.ListCheckpointsRequest(identity=VICTIM, page_token="x"),
        "INVALID_ARGUMENT",
        "page_token",
    ),
}

ASSEMBLY_CASES: dict[str, Case] = {
    "assemble negative budget": Case(
        "assembly.Assemble",
        assembly_pb2.AssembleRequest(identity=VICTIM, messages=[text("hi")], token_budget=-1),
        "INVALID_ARGUMENT",
        "token_budget",
    ),
    "assemble bad role": Case(
        "assembly.Assemble",
        assembly_pb2.AssembleRequest(identity=VICTIM, messages=[text("hi", 7)]),
        "INVALID_ARGUMENT",
        "messages[0].role",
    ),  # type: ignore[arg-type]
    "assemble NaN arguments": Case(
        "assembly.Assemble",
        assembly_pb2.AssembleRequest(identity=VICTIM, messages=[text("q"), call("NaN")]),
        "INVALID_ARGUMENT",
        ARGS,
    ),
    "recall empty query": Case(
        "assembly.RecallMemories",
        assembly_pb2.RecallMemoriesRequest(identity=VICTIM),
        "INVALID_ARGUMENT",
        "query",
    ),
    "recall negative limit": Case(
        "assembly.RecallMemories",
        assembly_pb2.RecallMemoriesRequest(identity=VICTIM, query="q", limit=-1),
        "INVALID_ARGUMENT",
        "limit",
    ),
    "recall without account": Case(
        "assembly.RecallMemories",
        assembly_pb2.RecallMemoriesRequest(identity=ident(account_id=""), query="q"),
        "INVALID_ARGUMENT",
        "identity.account_id",
    ),
}
