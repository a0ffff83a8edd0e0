"""`ContextEngine`: one channel to the engine, every RPC with a deadline, UNAVAILABLE retried.

Retries are gRPC's own (a service config `retryPolicy` on UNAVAILABLE only): every write the
engine takes is safe to repeat (AfterTurn's message ids and CommitTurn's advancement key make a
repeat a duplicate, not a second copy), and every other status is an answer, not a hiccup.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

import grpc
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

SERVICES = (
    "contextengine.v1.CaptureService",
    "contextengine.v1.AssemblyService",
    "contextengine.v1.CompactionService",
)


@dataclass(frozen=True)
class Deadlines:
    """Seconds each kind of call may take before it fails with DEADLINE_EXCEEDED."""

    assemble: float = 8.0
    """Assemble degrades (answers without recall) rather than wait past its recall timeout."""
    turn: float = 15.0
    """AfterTurn, CommitTurn, Ingest and the memory calls."""
    compact: float = 120.0
    """A synchronous Compact waits for OpenViking's phase 2."""
    read: float = 15.0
    """ExpandMemory, GetCheckpoint, ListCheckpoints, RecallMemories."""


def service_config(attempts: int) -> str:
    """The channel's service config: `attempts` tries in all on UNAVAILABLE, backing off."""
    policy = {
        "maxAttempts": attempts,
        "initialBackoff": "0.2s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    return json.dumps({"methodConfig": [{"name": [{"service": s} for s in SERVICES], "retryPolicy": policy}]})


class ContextEngine:
    """The engine's three services over one channel (`context-engine --service all`, or one
    address in front of them). Use `async with ContextEngine.connect(target) as engine:`."""

    def __init__(self, channel: aio.Channel, deadlines: Deadlines | None = None) -> None:
        self.channel = channel
        self.deadlines = deadlines or Deadlines()
        self.capture = capture_pb2_grpc.CaptureServiceStub(channel)
        self.assembly = assembly_pb2_grpc.AssemblyServiceStub(channel)
        self.compaction = compaction_pb2_grpc.CompactionServiceStub(channel)

    @classmethod
    def connect(
        cls,
        target: str = "127.0.0.1:50051",
        *,
        credentials: grpc.ChannelCredentials | None = None,
        deadlines: Deadlines | None = None,
        attempts: int = 4,
    ) -> ContextEngine:
        """A client of `target`; TLS when `credentials` is given (`grpc.ssl_channel_credentials()`)."""
        options = [("grpc.enable_retries", 1), ("grpc.service_config", service_config(attempts))]
        channel = (
            aio.secure_channel(target, credentials, options=options)
            if credentials is not None
            else aio.insecure_channel(target, options=options)
        )
        return cls(channel, deadlines)

    async def close(self) -> None:
        await self.channel.close()

    async def __aenter__(self) -> ContextEngine:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def assemble(
        self,
        identity: common_pb2.Identity,
        messages: Sequence[common_pb2.ConversationMessage],
        *,
        prompt: str = "",
        token_budget: int = 0,
        model: str = "",
    ) -> assembly_pb2.AssembleResponse:
        """What the model should see for `messages` (the host's whole transcript, the new user
        message last). `token_budget` 0 = the engine's `defaultTokenBudget` (128000)."""
        request = assembly_pb2.AssembleRequest(
            identity=identity, messages=messages, prompt=prompt, token_budget=token_budget, model=model
        )
        return await self.assembly.Assemble(request, timeout=self.deadlines.assemble)

    async def after_turn(
        self,
        identity: common_pb2.Identity,
        messages: Sequence[common_pb2.ConversationMessage],
        *,
        pre_prompt_message_count: int,
        token_budget: int = 0,
        model: str = "",
    ) -> capture_pb2.AfterTurnResponse:
        """Store a finished turn: `messages` is the whole transcript after it, of which the first
        `pre_prompt_message_count` existed before this turn's user message."""
        request = capture_pb2.AfterTurnRequest(
            identity=identity,
            messages=messages,
            pre_prompt_message_count=pre_prompt_message_count,
            token_budget=token_budget,
            model=model,
        )
        return await self.capture.AfterTurn(request, timeout=self.deadlines.turn)

    async def commit_turn(
        self,
        identity: common_pb2.Identity,
        messages: Sequence[common_pb2.ConversationMessage],
        *,
        advancement_key: str,
        token_budget: int = 0,
        model: str = "",
    ) -> capture_pb2.CommitTurnResponse:
        """Store one turn whole or not at all (hosts that fence turns): only this turn's
        messages; a repeat with the same `advancement_key` answers DUPLICATE."""
        request = capture_pb2.CommitTurnRequest(
            identity=identity,
            messages=messages,
            advancement_key=advancement_key,
            token_budget=token_budget,
            model=model,
        )
        return await self.capture.CommitTurn(request, timeout=self.deadlines.turn)

    async def compact(
        self, identity: common_pb2.Identity, *, force: bool = False, background: bool = False
    ) -> compaction_pb2.CompactResponse:
        request = compaction_pb2.CompactRequest(identity=identity, force=force, background=background)
        return await self.compaction.Compact(request, timeout=self.deadlines.compact)

    async def expand_memory(
        self,
        identity: common_pb2.Identity,
        uri: str,
        *,
        query: str = "",
        limit: int = 0,
        page_token: str = "",
    ) -> compaction_pb2.ExpandMemoryResponse:
        """The raw turns behind a summary, checkpoint, recalled exchange or memory `uri`."""
        request = compaction_pb2.ExpandMemoryRequest(
            identity=identity, summary_or_memory_uri=uri, query=query, limit=limit, page_token=page_token
        )
        return await self.compaction.ExpandMemory(request, timeout=self.deadlines.read)

    async def list_checkpoints(
        self, identity: common_pb2.Identity, *, page_size: int = 0, page_token: str = ""
    ) -> compaction_pb2.ListCheckpointsResponse:
        """The session's checkpoints, newest first (the user's across sessions without `session_id`)."""
        request = compaction_pb2.ListCheckpointsRequest(
            identity=identity, page_size=page_size, page_token=page_token
        )
        return await self.compaction.ListCheckpoints(request, timeout=self.deadlines.read)

    async def store_memory(
        self, identity: common_pb2.Identity, text: str, *, category: str = ""
    ) -> capture_pb2.StoreMemoryResponse:
        request = capture_pb2.StoreMemoryRequest(identity=identity, text=text, category=category)
        return await self.capture.StoreMemory(request, timeout=self.deadlines.turn)

    async def recall_memories(
        self, identity: common_pb2.Identity, query: str, *, limit: int = 0
    ) -> assembly_pb2.RecallMemoriesResponse:
        request = assembly_pb2.RecallMemoriesRequest(identity=identity, query=query, limit=limit)
        return await self.assembly.RecallMemories(request, timeout=self.deadlines.read)
