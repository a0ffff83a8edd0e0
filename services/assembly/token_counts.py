"""Token counts of host and engine messages in the host model's tokenizer, cached by content."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from contextengine.v1 import common_pb2

from shared.domain.messages import image_count, message_texts
from shared.tokens import TokenCounter

IMAGE_TOKENS = 85
"""Tokens charged per image block (a low-detail image; the engine never sees the pixels)."""


def _digest(message: common_pb2.ConversationMessage) -> bytes:
    return hashlib.blake2b(message.SerializeToString(deterministic=True), digest_size=16).digest()


class TokenCountCache:
    """Token counts of messages seen by earlier calls, by content. Hosts resend the whole
    transcript on every call, so after the first call only new messages are tokenized."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._counts)

    def get(self, key: tuple[str, bytes]) -> int | None:
        tokens = self._counts.get(key)
        if tokens is not None:
            self._counts.move_to_end(key)
        return tokens

    def put(self, key: tuple[str, bytes], tokens: int) -> None:
        self._counts[key] = tokens
        if len(self._counts) > self._capacity:
            self._counts.popitem(last=False)


class MessageTokens:
    """Token counts per message: once per message object within one call, and across calls
    through `shared` (keyed by encoding and content digest)."""

    def __init__(self, counter: TokenCounter, shared: TokenCountCache | None = None) -> None:
        self.counter = counter
        self._shared = shared
        self._cache: dict[int, tuple[common_pb2.ConversationMessage, int]] = {}

    def __call__(self, message: common_pb2.ConversationMessage) -> int:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = (self.counter.encoding_name, _digest(message))
        tokens = self._shared.get(key) if self._shared is not None else None
        if tokens is None:
            tokens = self.counter.count_message(message_texts(message)) + IMAGE_TOKENS * image_count(message)
            if self._shared is not None:
                self._shared.put(key, tokens)
        self._cache[id(message)] = (message, tokens)
        return tokens

    def total(self, messages: Sequence[common_pb2.ConversationMessage]) -> int:
        return sum(self(m) for m in messages)
