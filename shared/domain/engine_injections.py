"""Whole messages the engine itself put into a host transcript, recognised however the host
reshaped them on the way back.

Assembly injects auto recall as an assistant `memory_recall_auto` tool call followed by its tool
result, and compact summaries as a user message beginning `[Session History Summary]`; each
carries an id starting `ce-injected-` and a `contextengine_injected` key in host_fields. A host
may hand them back in its next call without either mark: OpenClaw keeps its messages without
an id, may drop unknown fields and renames a tool-call id it has seen before (`abc` -> `abc2`).
So a message also counts as injected by its form: a call naming only `memory_recall_auto`, a
result of `memory_recall_auto` or of one of the transcript's recall call ids, a user message of
nothing but summary text. The model cannot call `memory_recall_auto` (it is never offered as a
tool), so no host message has that form by itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from contextengine.v1 import common_pb2

from shared.domain.json_text import loads_or_none

INJECTED_ID_PREFIX = "ce-injected-"
"""Every engine-injected message's `ConversationMessage.id` starts with this."""
INJECTED_MARKER_KEY = "contextengine_injected"
"""Key of the host_fields JSON marker; its value says what was injected."""
AUTO_RECALL_TOOL = "memory_recall_auto"
SUMMARY_HEADER = "[Session History Summary]"

Role = common_pb2.MessageRole


def has_injected_marker(message: common_pb2.ConversationMessage) -> bool:
    """True for messages that still carry the engine's id prefix or host_fields marker."""
    if message.id.startswith(INJECTED_ID_PREFIX):
        return True
    raw = message.host_fields.json
    if INJECTED_MARKER_KEY not in raw:
        return False
    fields = loads_or_none(raw)
    return isinstance(fields, dict) and INJECTED_MARKER_KEY in fields


def recall_call_ids(messages: Iterable[common_pb2.ConversationMessage]) -> frozenset[str]:
    """Ids of every `memory_recall_auto` tool call in `messages` (as the host spells them)."""
    return frozenset(
        block.tool_call.id
        for message in messages
        for block in message.content
        if block.HasField("tool_call") and block.tool_call.name == AUTO_RECALL_TOOL
    )


def _blank(block: common_pb2.ContentBlock) -> bool:
    return block.HasField("text") and not block.text.text.strip()


def _is_recall_call(message: common_pb2.ConversationMessage) -> bool:
    calls = [b for b in message.content if not _blank(b)]
    return bool(calls) and all(
        b.HasField("tool_call") and b.tool_call.name == AUTO_RECALL_TOOL for b in calls
    )


def _is_recall_result(message: common_pb2.ConversationMessage, recall_ids: frozenset[str]) -> bool:
    results = [b.tool_result for b in message.content if b.HasField("tool_result")]
    return bool(results) and all(
        r.tool_name == AUTO_RECALL_TOOL or (bool(r.tool_call_id) and r.tool_call_id in recall_ids)
        for r in results
    )


def _is_summary(message: common_pb2.ConversationMessage) -> bool:
    return (
        bool(message.content)
        and all(b.HasField("text") for b in message.content)
        and message.content[0].text.text.lstrip().startswith(SUMMARY_HEADER)
    )


def is_injected_message(message: common_pb2.ConversationMessage, recall_ids: frozenset[str]) -> bool:
    """True when all of `message` is the engine's: marked, or in the form of an injection.
    `recall_ids`: the transcript's recall call ids (`recall_call_ids`)."""
    if has_injected_marker(message):
        return True
    if message.role == Role.MESSAGE_ROLE_ASSISTANT:
        return _is_recall_call(message)
    if message.role == Role.MESSAGE_ROLE_TOOL_RESULT:
        return _is_recall_result(message, recall_ids)
    if message.role == Role.MESSAGE_ROLE_USER:
        return _is_summary(message)
    return False
