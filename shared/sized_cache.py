"""A bounded least-recently-used map, for the per-replica caches of the hot paths.

Hosts resend the whole transcript on every call, so what the engine derives from a message
(its validation, its token count) is looked up ~1,500 times per Assemble over a 500-turn
transcript. Lookups here are one `OrderedDict` operation each (C); a general-purpose cache
library costs several Python calls per lookup, which is the very time these caches save.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from contextengine.v1 import common_pb2

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MessageKey = tuple[int, int]
"""A message's content identity within this process: (SipHash of its wire bytes, their length)."""


def message_key(message: common_pb2.ConversationMessage) -> MessageKey:
    """The content key of `message`. Python's bytes hash is SipHash keyed per process, so keys can
    be neither predicted nor forged from outside; equal messages always get equal keys."""
    wire = message.SerializeToString(deterministic=True)
    return hash(wire), len(wire)


class SizedCache(Generic[K, V]):
    """Entries whose weights (1 each unless `put` says otherwise) add up to at most `capacity`;
    the least recently used ones go first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._weights: dict[K, int] = {}
        self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, weight: int = 1) -> None:
        """Keep `value`; an entry heavier than the whole capacity is not kept."""
        self.pop(key)
        if weight > self._capacity:
            return
        self._entries[key] = value
        self._weights[key] = weight
        self._weight += weight
        while self._weight > self._capacity:
            oldest, _ = self._entries.popitem(last=False)
            self._weight -= self._weights.pop(oldest)

    def pop(self, key: K) -> V | None:
        self._weight -= self._weights.pop(key, 0)
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
        self._weights.clear()
        self._weight = 0
