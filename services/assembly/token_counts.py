"""Token counts of host and engine messages in the host model's tokenizer, cached by content."""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.v1 import common_pb2

from shared.domain.messages import MessageKeys, image_count, message_texts
from shared.sized_cache import MessageKey, SizedCache
from shared.tokens import TokenCounter

IMAGE_TOKENS = 85
"""Tokens charged per image block (a low-detail image; the engine never sees the pixels)."""


TOKEN_COUNTS = 100_000
"""Messages whose token count a replica remembers, per encoding."""


class TokenCountCache(SizedCache[tuple[str, MessageKey], int]):
    """Token counts of messages seen by earlier calls, by encoding and content. Hosts resend the
    whole transcript on every call, so after the first call only new messages are tokenized."""

    def __init__(self, capacity: int = TOKEN_COUNTS) -> None:
        super().__init__(capacity)


class MessageTokens:
    """Token counts per message: once per message object within one call, and across calls
    through `shared` (keyed by encoding and content digest)."""

    def __init__(
        self, counter: TokenCounter, shared: TokenCountCache | None = None, keys: MessageKeys | None = None
    ) -> None:
        self.counter = counter
        self._shared = shared
        self._keys = keys or MessageKeys()
        self._cache: dict[int, tuple[common_pb2.ConversationMessage, int]] = {}

    def __call__(self, message: common_pb2.ConversationMessage) -> int:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        key = (self.counter.encoding_name, self._keys(message))
        tokens = self._shared.get(key) if self._shared is not None else None
        if tokens is None:
            tokens = self.counter.count_message(message_texts(message)) + IMAGE_TOKENS * image_count(message)
            if self._shared is not None:
                self._shared.put(key, tokens)
        self._cache[id(message)] = (message, tokens)
        return tokens

    def remember(self, message: common_pb2.ConversationMessage, tokens: int) -> None:
        """`message`'s count, known without tokenizing it (this call only)."""
        self._cache[id(message)] = (message, tokens)

    def total(self, messages: Sequence[common_pb2.ConversationMessage]) -> int:
        return sum(self(m) for m in messages)
