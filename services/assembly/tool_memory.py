"""Tool experience for the tools the model is about to use again.

A tool is "about to be used" when the prompt names it (a whole word, `_`/`-`/`.` as spaces too)
or one of the newest messages called it (a tool loop iteration). Only tools with a failure to
tell are shown: what failed (error, argument shape) and what worked after it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contextengine.v1 import common_pb2, packet_pb2

from shared.domain.tool_experience import ToolRecord
from shared.tokens import TokenCounter

RECENT_MESSAGES = 6
MAX_TOOLS_SHOWN = 4
TOOLS_HEADER = "[Tool experience] From your earlier calls of these tools:"


@dataclass(frozen=True)
class ToolSection:
    text: str
    tokens: int
    experience: list[packet_pb2.ToolExperience]


def _spelled(name: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in re.split(r"[_\-.\s]+", name.lower()) if w]
    return re.compile(r"\b" + r"[_\-.\s]?".join(words) + r"\b")


def tools_named(
    prompt: str, newest_first: Sequence[common_pb2.ConversationMessage], known: Sequence[str]
) -> list[str]:
    """The `known` tools the prompt names or the newest messages called, called ones first."""
    called: list[str] = []
    for message in newest_first[:RECENT_MESSAGES]:
        for block in message.content:
            if (
                block.HasField("tool_call")
                and block.tool_call.name in known
                and block.tool_call.name not in called
            ):
                called.append(block.tool_call.name)
    text = prompt.lower()
    named = [name for name in known if name not in called and _spelled(name).search(text)]
    return called + named


def _line(record: ToolRecord) -> str:
    parts = [f"- {record.tool_name}: failed {record.failures} time(s); last error: {record.error}"]
    if record.failing_arguments:
        parts.append(f"failing arguments: {record.failing_arguments}")
    if record.fix_arguments:
        parts.append(f"then worked with: {record.fix_arguments}")
    elif record.awaiting_fix:
        parts.append("no successful call since")
    return "; ".join(parts)


def render_tools(
    names: Sequence[str], records: Mapping[str, ToolRecord], counter: TokenCounter, max_tokens: int
) -> ToolSection:
    lines = [TOOLS_HEADER]
    shown: list[packet_pb2.ToolExperience] = []
    for name in names:
        record = records.get(name)
        if record is None or not record.worth_telling or len(shown) == MAX_TOOLS_SHOWN:
            continue
        line = _line(record)
        if counter.count("\n".join([*lines, line])) > max_tokens:
            break
        lines.append(line)
        shown.append(record.to_proto())
    if not shown:
        return ToolSection("", 0, [])
    text = "\n".join(lines)
    return ToolSection(text, counter.count(text), shown)
