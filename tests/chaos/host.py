"""A host that behaves like OpenClaw under faults: it sends the whole transcript after every
turn, sometimes twice at once to both capture replicas, and retries what the engine says is
safe to retry (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED) on any replica."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import grpc
from contextengine.v1 import capture_pb2, capture_pb2_grpc, common_pb2
from grpc import aio

from tests.capture.messages import assistant, user

RETRIABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED}
CALL_TIMEOUT_SECONDS = 5.0
GIVE_UP_SECONDS = 240.0
"""A delivery retried for longer than this fails the run (covers an OpenViking restart)."""


@dataclass
class HostSession:
    identity: common_pb2.Identity
    transcript: list[common_pb2.ConversationMessage] = field(default_factory=list)

    def next_turn(self) -> capture_pb2.AfterTurnRequest:
        n = len(self.transcript) // 2
        pre = len(self.transcript)
        self.transcript += [
            user(f"{self.identity.session_id} turn {n}: please check item {n}"),
            assistant(f"Item {n} of {self.identity.session_id} checked."),
        ]
        return capture_pb2.AfterTurnRequest(
            identity=self.identity, messages=self.transcript, pre_prompt_message_count=pre
        )


@dataclass
class Host:
    addresses: list[str]
    rng: random.Random
    duplicate_rate: float = 0.1
    codes: Counter[str] = field(default_factory=Counter)
    """Every status code the engine answered (OK included)."""
    _channels: dict[str, aio.Channel] = field(default_factory=dict)

    def _stub(self) -> capture_pb2_grpc.CaptureServiceAsyncStub:
        address = self.rng.choice(self.addresses)
        if address not in self._channels:
            self._channels[address] = aio.insecure_channel(address)
        return capture_pb2_grpc.CaptureServiceStub(self._channels[address])

    async def _deliver(self, request: capture_pb2.AfterTurnRequest) -> None:
        give_up = time.monotonic() + GIVE_UP_SECONDS
        while True:
            try:
                await self._stub().AfterTurn(request, timeout=CALL_TIMEOUT_SECONDS)
                self.codes["OK"] += 1
                return
            except aio.AioRpcError as error:
                self.codes[error.code().name] += 1
                if error.code() not in RETRIABLE or time.monotonic() > give_up:
                    raise
            await asyncio.sleep(self.rng.uniform(0.1, 0.6))

    async def turn(self, session: HostSession) -> None:
        request = session.next_turn()
        if self.rng.random() < self.duplicate_rate:
            await asyncio.gather(self._deliver(request), self._deliver(request))  # concurrent duplicate
        else:
            await self._deliver(request)

    async def flush(self, session: HostSession) -> None:
        """What the host does on dispose: FlushSessions for the session, retried like a turn."""
        give_up = time.monotonic() + GIVE_UP_SECONDS
        while True:
            try:
                await self._stub().FlushSessions(
                    capture_pb2.FlushSessionsRequest(identity=session.identity), timeout=30
                )
                return
            except aio.AioRpcError as error:
                if error.code() not in RETRIABLE or time.monotonic() > give_up:
                    raise
            await asyncio.sleep(0.5)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
