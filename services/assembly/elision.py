"""Older tool outputs that are too long keep their head and tail; the middle becomes a pointer
`memory_expand` resolves to the whole output."""

from __future__ import annotations

from collections.abc import Callable

from contextengine.v1 import common_pb2

from services.assembly.token_counts import MessageTokens
from shared.domain.turns import Turn

MIN_ELISION_TOKENS = 128
"""Older tool outputs are never cut below this many tokens."""

Pointer = Callable[[int, common_pb2.ConversationMessage], str]
"""(transcript position, message) -> what `memory_expand` takes to return that message whole."""


def elision_limit(budget: int) -> int:
    """Older tool outputs longer than this many tokens have their middle elided."""
    return max(MIN_ELISION_TOKENS, budget // 8)


def elided(
    message: common_pb2.ConversationMessage, limit: int, tokens: int, pointer: str
) -> common_pb2.ConversationMessage:
    """`message` with the middle of each long tool-result text replaced by a pointer."""
    out = common_pb2.ConversationMessage()
    out.CopyFrom(message)
    keep_chars = limit * 3  # ~4 characters a token: leaves room for the marker
    for block in out.content:
        if not block.HasField("tool_result"):
            continue
        for part in block.tool_result.content:
            text = part.text.text
            if part.HasField("text") and len(text) > keep_chars:
                head, tail = text[: keep_chars * 2 // 3], text[-(keep_chars // 3) :]
                part.text.text = (
                    f"{head}\n[... about {tokens - limit} tokens elided; "
                    f'memory_expand("{pointer}") returns the whole output ...]\n{tail}'
                )
    return out


def elide_turn(turn: Turn, count: MessageTokens, limit: int, pointer: Pointer | None) -> Turn:
    if pointer is None:
        return turn
    messages = []
    for offset, message in enumerate(turn.messages):
        tokens = count(message)
        kept = message
        if message.role == common_pb2.MESSAGE_ROLE_TOOL_RESULT and tokens > limit:
            shorter = elided(message, limit, tokens, pointer(turn.start + offset, message))
            if count(shorter) < tokens:
                kept = shorter
        messages.append(kept)
    return Turn(turn.start, tuple(messages))
