"""Recognising what the engine itself injected into the host transcript, so it is never captured.

Whole injected messages (auto recall's call and result, summaries, with or without the engine's
marks) are recognised as `shared.domain.engine_injections` says; here also the injected blocks
inside a host's own message, and the `<relevant-memories>` blocks the legacy fallback path
prepends to user text. The markers are the contract with `services.assembly.injection`; a test
pins that both sides agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from contextengine.v1 import common_pb2

from shared.domain.engine_injections import (
    AUTO_RECALL_TOOL,
    is_injected_message,
)
from shared.domain.engine_injections import recall_call_ids as auto_recall_call_ids
from shared.domain.json_text import loads_or_none
from shared.domain.messages import MessageShape

RELEVANT_MEMORIES_BLOCK = re.compile(r"<relevant-memories>.*?</relevant-memories>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class CleanedMessage:
    """One host message with the engine's injections removed.

    `message` is None when nothing of the host's own remains (the whole message was injected).
    """

    message: common_pb2.ConversationMessage | None
    injected: bool
    """True when the message as a whole was an engine injection and is skipped."""
    used_context_uris: tuple[str, ...] = ()
    """Memories the engine injected right before this message (what the model answered with)."""
    skipped: int = 0
    """Engine injections recognised in this message and not captured: 1 for a whole injected
    message (id prefix or host_fields marker); otherwise one per injected recall block and one
    per `<relevant-memories>` block stripped from its text."""


def strip_relevant_memories(text: str) -> tuple[str, int]:
    """Text without injected `<relevant-memories>` blocks (and the blank lines they leave), and
    how many blocks were stripped."""
    if "<relevant-memories>" not in text.lower():
        return text, 0
    stripped, count = RELEVANT_MEMORIES_BLOCK.subn("", text)
    return (stripped.strip(), count) if count else (text, 0)


def auto_recall_call_ids_of(shapes: Sequence[MessageShape]) -> frozenset[str]:
    """The same, from the messages' validated shapes (no message is looked into again)."""
    return frozenset(
        call_id
        for shape in shapes
        if shape.call_ids
        for call_id, name in zip(shape.call_ids, shape.call_names, strict=True)
        if name == AUTO_RECALL_TOOL
    )


def _is_injected_block(block: common_pb2.ContentBlock, recall_ids: frozenset[str]) -> bool:
    if block.HasField("tool_call"):
        return block.tool_call.name == AUTO_RECALL_TOOL
    if block.HasField("tool_result"):
        result = block.tool_result
        return result.tool_name == AUTO_RECALL_TOOL or (
            bool(result.tool_call_id) and result.tool_call_id in recall_ids
        )
    return False


def clean_message(message: common_pb2.ConversationMessage, recall_ids: frozenset[str]) -> CleanedMessage:
    """The host's own part of `message`: injected blocks dropped, recall text blocks stripped."""
    if is_injected_message(message, recall_ids):
        return CleanedMessage(None, injected=True, skipped=1)
    if not any(
        _is_injected_block(b, recall_ids)
        or (b.HasField("text") and "<relevant-memories>" in b.text.text.lower())
        for b in message.content
    ):
        return CleanedMessage(message, injected=False)
    cleaned = common_pb2.ConversationMessage()
    cleaned.CopyFrom(message)
    del cleaned.content[:]
    skipped = 0
    for block in message.content:
        if _is_injected_block(block, recall_ids):
            skipped += 1
            continue
        if block.HasField("text"):
            text, stripped = strip_relevant_memories(block.text.text)
            skipped += stripped
            if not text and block.text.text:
                continue  # the block was nothing but injected memories
            cleaned.content.append(common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text)))
            continue
        cleaned.content.append(block)
    if not cleaned.content:
        return CleanedMessage(None, injected=True, skipped=skipped)
    return CleanedMessage(cleaned, injected=False, skipped=skipped)


def recalled_uris(message: common_pb2.ConversationMessage, recall_ids: frozenset[str]) -> list[str]:
    """URIs listed in the injected recall results of `message` (`{"memories": [{"uri": ...}]}`)."""
    uris: list[str] = []
    for block in message.content:
        if not (block.HasField("tool_result") and _is_injected_block(block, recall_ids)):
            continue
        for part in block.tool_result.content:
            payload = loads_or_none(part.text.text) if part.HasField("text") else None
            memories = payload.get("memories", []) if isinstance(payload, dict) else []
            uris.extend(m["uri"] for m in memories if isinstance(m, dict) and isinstance(m.get("uri"), str))
    return uris


def clean_transcript(
    messages: Sequence[common_pb2.ConversationMessage], recall_ids: frozenset[str] | None = None
) -> list[CleanedMessage]:
    """Every message cleaned; the URIs of an injected recall go to the next assistant message.
    `recall_ids`: the auto-recall call ids, when `messages` is the tail of a longer transcript."""
    recall_ids = auto_recall_call_ids(messages) if recall_ids is None else recall_ids
    cleaned: list[CleanedMessage] = []
    pending: list[str] = []
    for message in messages:
        pending.extend(uri for uri in recalled_uris(message, recall_ids) if uri not in pending)
        result = clean_message(message, recall_ids)
        if pending and not result.injected and message.role == common_pb2.MESSAGE_ROLE_ASSISTANT:
            result = replace(result, used_context_uris=tuple(pending))
            pending = []
        cleaned.append(result)
    return cleaned


class CleanedTranscript:
    """A whole host transcript, cleaned only from where the messages asked for need it.

    Hosts resend the whole transcript on every AfterTurn; only its unpersisted tail is stored.
    Cleaning carries one thing from message to message, the recalled URIs waiting for the next
    assistant message, and a host assistant message takes them all. So cleaning from just after
    the last such message before index `i` gives `i` what cleaning the whole transcript would.
    """

    def __init__(
        self, messages: Sequence[common_pb2.ConversationMessage], shapes: Sequence[MessageShape]
    ) -> None:
        """`shapes`: the messages' validated shapes (the auto-recall call ids are read from them)."""
        self._messages = messages
        self._recall_ids = auto_recall_call_ids_of(shapes)
        self._start = len(messages)
        self._cleaned: list[CleanedMessage] = []

    def __getitem__(self, index: int) -> CleanedMessage:
        if index < self._start:
            self._clean_from(self._resume_point(index))
        return self._cleaned[index - self._start]

    def tail(self, start: int) -> list[CleanedMessage]:
        """The cleaned messages from `start` on."""
        if start < self._start and start < len(self._messages):
            self._clean_from(self._resume_point(start))
        return self._cleaned[max(0, start - self._start) :]

    def _resume_point(self, index: int) -> int:
        for j in range(index - 1, -1, -1):
            message = self._messages[j]
            if (
                message.role == common_pb2.MESSAGE_ROLE_ASSISTANT
                and not clean_message(message, self._recall_ids).injected
            ):
                return j + 1
        return 0

    def _clean_from(self, start: int) -> None:
        self._cleaned = clean_transcript(self._messages[start:], self._recall_ids)
        self._start = start
