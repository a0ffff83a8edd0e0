"""The capture decision (docs/design.md §3.2 step 5): is the new user text worth extracting memories from?

It only sets `capture_worthy`; persistence never depends on it (lossless first, docs/design.md §2). The rules
are the upstream plugin's: sanitise (injected recall blocks, host metadata blocks, a leading
channel timestamp, NULs, whitespace), then reject empty, too short or too long text, slash
commands, punctuation-only text, sub-agent context and bare questions without memory intent.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from services.capture.injections import RELEVANT_MEMORIES_BLOCK

_CONVERSATION_METADATA = re.compile(
    r"(?:^|\n)\s*(?:Conversation info|Conversation metadata|会话信息|对话信息)"
    r"\s*(?:\([^)]+\))?\s*:\s*```.*?```",
    re.DOTALL | re.IGNORECASE,
)
_SENDER_METADATA = re.compile(r"Sender\s*\([^)]*\)\s*:\s*```.*?```", re.DOTALL | re.IGNORECASE)
_REPLIED_MESSAGE = re.compile(r"(?:^|\n)\s*Replied message[^\n]*:\s*```json.*?```", re.DOTALL | re.IGNORECASE)
_FENCED_JSON = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_METADATA_JSON_KEY = re.compile(
    r'"(session|sessionid|sessionkey|conversationid|channel|sender|userid|agentid|timestamp|timezone)"\s*:',
    re.IGNORECASE,
)
_LEADING_TIMESTAMP = re.compile(r"^\s*\[[^\]\n]{1,120}\]\s*")
_COMMAND = re.compile(r"^/[a-z0-9_-]{1,64}\b", re.IGNORECASE)
_SUBAGENT_CONTEXT = re.compile(r"^\s*\[Subagent Context\]", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_MEMORY_INTENT = re.compile(
    r"记住|记下|remember|save|store|偏好|preference|规则|rule|事实|fact", re.IGNORECASE
)
_QUESTION_CUE = re.compile(
    r"[?\uff1f]|\b(?:what|when|where|who|why|how|which|can|could|would|did|does|is|are)\b"
    r"|^(?:请问|能否|可否|怎么|如何|什么时候|谁|什么|哪|是否)",
    re.IGNORECASE,
)
_SPEAKER_TAG = re.compile(r"[A-Za-z\u4e00-\u9fa5]{2,20}:\s")
MIN_CHARS = 10
MIN_CJK_CHARS = 4
LONG_QUESTION_CHARS = 280


@dataclass(frozen=True)
class CaptureDecision:
    worthy: bool
    reason: str


def _strip_metadata_json(match: re.Match[str]) -> str:
    keys = {key.lower() for key in _METADATA_JSON_KEY.findall(match.group(1))}
    return " " if len(keys) >= 3 else match.group(0)


def sanitize_for_capture(text: str) -> str:
    text = RELEVANT_MEMORIES_BLOCK.sub(" ", text)
    text = _CONVERSATION_METADATA.sub(" ", text)
    text = _SENDER_METADATA.sub(" ", text)
    text = _REPLIED_MESSAGE.sub(" ", text)
    text = _FENCED_JSON.sub(_strip_metadata_json, text)
    text = _LEADING_TIMESTAMP.sub("", text).replace("\x00", "")
    text = " ".join(text.split())
    # The timestamp only reaches the front once the recall block before it is gone.
    return " ".join(_LEADING_TIMESTAMP.sub("", text).split())


def _is_punctuation_only(text: str) -> bool:
    return all(ch.isspace() or unicodedata.category(ch)[0] in "PS" for ch in text)


def _is_bare_question(text: str) -> bool:
    if not _QUESTION_CUE.search(text) or _MEMORY_INTENT.search(text):
        return False
    return len(_SPEAKER_TAG.findall(text)) < 2 and len(text) <= LONG_QUESTION_CHARS


def capture_decision(text: str, max_length: int) -> CaptureDecision:  # noqa: PLR0911 - one rule each
    trimmed = text.strip()
    normalized = sanitize_for_capture(trimmed)
    if not normalized:
        reason = "injected_memory_context_only" if "<relevant-memories>" in trimmed.lower() else "empty_text"
        return CaptureDecision(False, reason)
    compact = "".join(normalized.split())
    minimum = MIN_CJK_CHARS if _CJK.search(compact) else MIN_CHARS
    if len(compact) < minimum or len(normalized) > max_length:
        return CaptureDecision(False, "length_out_of_range")
    if _COMMAND.match(normalized):
        return CaptureDecision(False, "command_text")
    if _is_punctuation_only(normalized):
        return CaptureDecision(False, "non_content_text")
    if _SUBAGENT_CONTEXT.match(trimmed) or _SUBAGENT_CONTEXT.match(normalized):
        return CaptureDecision(False, "subagent_context")
    if _is_bare_question(normalized):
        return CaptureDecision(False, "question_text")
    return CaptureDecision(True, "semantic_candidate")
