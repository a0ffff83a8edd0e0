"""A host driving the engine through the public gRPC API only (generated stubs, no engine imports
beyond starting it in-process): transcripts with tool calls, Assemble/AfterTurn turns, waits."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
from contextengine.v1 import (
    assembly_pb2,
    assembly_pb2_grpc,
    capture_pb2,
    capture_pb2_grpc,
    checkpoint_pb2,
    common_pb2,
    compaction_pb2,
    compaction_pb2_grpc,
)

from shared.config import load_settings
from shared.domain.conversation import text_message, tool_call_message, tool_result_message
from shared.runtime.main import start_host

Role = common_pb2.MessageRole
Status = checkpoint_pb2.CheckpointStatus
MODEL = "gpt-4o"
BUDGET = 64_000
RPC_TIMEOUT = 60.0
COMPACT_TIMEOUT = 180.0
CHECKPOINT_WAIT_SECONDS = 150.0
AUTO_RECALL_TOOL = "memory_recall_auto"
SUMMARY_HEADER = "[Session History Summary]"
INJECTED_PREFIX = "ce-injected-"


def new_user_id(prefix: str = "u") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def message_texts(message: common_pb2.ConversationMessage) -> list[str]:
    """Every text the model would read in a message (text, tool call arguments, tool results)."""
    texts: list[str] = []
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            texts.append(block.text.text)
        elif kind == "tool_call":
            texts.append(f"{block.tool_call.name} {block.tool_call.arguments.json}")
        elif kind == "tool_result":
            texts.extend(c.text.text for c in block.tool_result.content if c.WhichOneof("block") == "text")
    return texts


def all_text(messages: Sequence[common_pb2.ConversationMessage]) -> str:
    return "\n".join(t for m in messages for t in message_texts(m))


def is_injected(message: common_pb2.ConversationMessage) -> bool:
    return message.id.startswith(INJECTED_PREFIX) or "contextengine_injected" in message.host_fields.json


def recall_pair(messages: Sequence[common_pb2.ConversationMessage]) -> list[common_pb2.ConversationMessage]:
    """The injected memory_recall_auto tool call and its result, in order (empty when absent)."""
    return [m for m in messages if is_injected(m) and AUTO_RECALL_TOOL in m.id]


def recalled_tool_result(messages: Sequence[common_pb2.ConversationMessage]) -> dict[str, object]:
    """The parsed JSON of the injected memory_recall_auto tool result."""
    for message in recall_pair(messages):
        for block in message.content:
            if block.WhichOneof("block") == "tool_result":
                parsed = json.loads(block.tool_result.content[0].text.text)
                assert isinstance(parsed, dict)
                return parsed
    raise AssertionError("no memory_recall_auto tool result in the assembled messages")


def envelope_text(turn: object) -> str:
    """Text of a TurnEnvelope (its text parts, tool call arguments and tool results)."""
    parts: list[str] = []
    for part in turn.parts:  # type: ignore[attr-defined]
        kind = part.WhichOneof("part")
        if kind == "text":
            parts.append(part.text.text)
        elif kind == "tool_call":
            parts.append(f"{part.tool_call.tool_name} {part.tool_call.arguments.json}")
        elif kind == "tool_result":
            parts.append(part.tool_result.result.json)
    return "\n".join(parts)


@dataclass
class Stubs:
    capture: capture_pb2_grpc.CaptureServiceStub
    assembly: assembly_pb2_grpc.AssemblyServiceStub
    compaction: compaction_pb2_grpc.CompactionServiceStub

    @classmethod
    def on(cls, channel: grpc.aio.Channel) -> Stubs:
        return cls(
            capture_pb2_grpc.CaptureServiceStub(channel),
            assembly_pb2_grpc.AssemblyServiceStub(channel),
            compaction_pb2_grpc.CompactionServiceStub(channel),
        )


@asynccontextmanager
async def engine(**overrides: object) -> AsyncIterator[Stubs]:
    """All three services in this process (as `make run` starts them), connected stubs."""
    settings = load_settings(environ={}, overrides={"shutdownGraceSeconds": 1, **overrides})
    host = await start_host(settings, "all", port=0)
    try:
        async with grpc.aio.insecure_channel(host.address) as channel:
            yield Stubs.on(channel)
    finally:
        await host.stop()


Tool = tuple[str, Mapping[str, object], str]
"""(tool name, arguments, output) of one tool exchange."""


@dataclass
class HostSession:
    """One host session (OpenClaw-like): keeps its own transcript, calls Assemble then AfterTurn."""

    stubs: Stubs
    account: str
    user: str
    session: str
    agent: str = "main"
    transcript: list[common_pb2.ConversationMessage] = field(default_factory=list)
    after_turns: list[capture_pb2.AfterTurnResponse] = field(default_factory=list)
    token_budget: int = BUDGET

    @property
    def identity(self) -> common_pb2.Identity:
        return common_pb2.Identity(
            account_id=self.account, user_id=self.user, agent_id=self.agent, session_id=self.session
        )

    def _next_id(self, kind: str) -> str:
        return f"{self.session}-{self.agent}-{kind}{len(self.transcript)}"

    async def assemble(self, prompt: str, *, token_budget: int = 0) -> assembly_pb2.AssembleResponse:
        """Assemble for a prompt that is about to be sent (the prompt is in the messages)."""
        messages = [*self.transcript, text_message(Role.MESSAGE_ROLE_USER, prompt, "pending")]
        return await self.stubs.assembly.Assemble(
            assembly_pb2.AssembleRequest(
                identity=self.identity,
                messages=messages,
                token_budget=token_budget or self.token_budget,
                model=MODEL,
                prompt=prompt,
            ),
            timeout=RPC_TIMEOUT,
        )

    async def turn(
        self, user_text: str, answer: str, tools: Sequence[Tool] = (), *, assemble: bool = True
    ) -> capture_pb2.AfterTurnResponse:
        """One turn: Assemble (optional), the model's tool exchanges and answer, then AfterTurn."""
        if assemble:
            await self.assemble(user_text)
        before = len(self.transcript)
        self.transcript.append(text_message(Role.MESSAGE_ROLE_USER, user_text, self._next_id("u")))
        for name, arguments, output in tools:
            call_id = uuid.uuid4().hex[:9]
            self.transcript.append(tool_call_message(self._next_id("c"), call_id, name, arguments))
            self.transcript.append(tool_result_message(self._next_id("t"), call_id, name, output))
        self.transcript.append(text_message(Role.MESSAGE_ROLE_ASSISTANT, answer, self._next_id("a")))
        response = await self.stubs.capture.AfterTurn(
            capture_pb2.AfterTurnRequest(
                identity=self.identity,
                messages=self.transcript,
                pre_prompt_message_count=before,
                token_budget=self.token_budget,
                model=MODEL,
            ),
            timeout=RPC_TIMEOUT,
        )
        self.after_turns.append(response)
        return response

    async def store(self, text: str, scope: int = 0, category: str = "") -> capture_pb2.StoreMemoryResponse:
        return await self.stubs.capture.StoreMemory(
            capture_pb2.StoreMemoryRequest(identity=self.identity, text=text, scope=scope, category=category),  # type: ignore[arg-type]
            timeout=RPC_TIMEOUT,
        )

    async def recall(self, query: str, limit: int = 0) -> assembly_pb2.RecallMemoriesResponse:
        return await self.stubs.assembly.RecallMemories(
            assembly_pb2.RecallMemoriesRequest(identity=self.identity, query=query, limit=limit),
            timeout=RPC_TIMEOUT,
        )

    async def compact(self) -> compaction_pb2.CompactResponse:
        return await self.stubs.compaction.Compact(
            compaction_pb2.CompactRequest(
                identity=self.identity, token_budget=self.token_budget, force=True, model=MODEL
            ),
            timeout=COMPACT_TIMEOUT,
        )

    async def expand(
        self, reference: str, query: str = "", limit: int = 0
    ) -> compaction_pb2.ExpandMemoryResponse:
        return await self.stubs.compaction.ExpandMemory(
            compaction_pb2.ExpandMemoryRequest(
                identity=self.identity, summary_or_memory_uri=reference, query=query, limit=limit
            ),
            timeout=RPC_TIMEOUT,
        )

    async def checkpoints(self) -> list[checkpoint_pb2.CompactCheckpoint]:
        listed = await self.stubs.compaction.ListCheckpoints(
            compaction_pb2.ListCheckpointsRequest(identity=self.identity, page_size=50), timeout=RPC_TIMEOUT
        )
        return list(listed.checkpoints)

    async def wait_checkpoint(
        self, checkpoint_id: str, seconds: float = CHECKPOINT_WAIT_SECONDS
    ) -> checkpoint_pb2.CompactCheckpoint:
        """Poll GetCheckpoint until it leaves PENDING (bounded)."""
        deadline = time.monotonic() + seconds
        while True:
            got = await self.stubs.compaction.GetCheckpoint(
                compaction_pb2.GetCheckpointRequest(identity=self.identity, checkpoint_id=checkpoint_id),
                timeout=RPC_TIMEOUT,
            )
            if got.checkpoint.status != Status.CHECKPOINT_STATUS_PENDING:
                return got.checkpoint
            if time.monotonic() > deadline:
                raise AssertionError(f"checkpoint {checkpoint_id} still pending after {seconds}s")
            await asyncio.sleep(0.5)

    async def wait_all_checkpoints(
        self, seconds: float = CHECKPOINT_WAIT_SECONDS
    ) -> list[checkpoint_pb2.CompactCheckpoint]:
        """Every checkpoint of this stream, after none is PENDING any more (bounded)."""
        deadline = time.monotonic() + seconds
        while True:
            listed = await self.checkpoints()
            if all(c.status != Status.CHECKPOINT_STATUS_PENDING for c in listed):
                return listed
            if time.monotonic() > deadline:
                raise AssertionError(f"checkpoints still pending after {seconds}s: {listed}")
            await asyncio.sleep(0.5)
