"""Host transcripts as turns: a user message and the assistant/tool messages after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextengine.v1 import common_pb2

from shared.domain.messages import MessageShape, tool_call_ids, tool_result_call_id


@dataclass(frozen=True)
class Turn:
    start: int
    """Index of the turn's first message in the host transcript."""
    messages: tuple[common_pb2.ConversationMessage, ...]


def _shape(message: common_pb2.ConversationMessage) -> tuple[int, Sequence[str], str]:
    return message.role, tool_call_ids(message), tool_result_call_id(message)


def split_turns(
    messages: Sequence[common_pb2.ConversationMessage], shapes: Sequence[MessageShape] | None = None
) -> list[Turn]:
    """Turns: each USER message starts one; messages before the first user message form one.

    A tool result whose call sits in an earlier turn merges the turns in between, so a call
    and its result always land in the same turn. `shapes` (from validation) saves reading the
    messages again.
    """
    if not messages:
        return []
    views = [(s.role, s.call_ids, s.answers) for s in shapes] if shapes is not None else map(_shape, messages)
    bounds: list[int] = []
    call_turn: dict[str, int] = {}
    for index, (role, call_ids, answered) in enumerate(views):
        if not bounds or role == common_pb2.MESSAGE_ROLE_USER:
            bounds.append(index)
        turn = len(bounds) - 1
        for call_id in call_ids:
            call_turn[call_id] = turn
        if answered in call_turn and call_turn[answered] < turn:
            first = call_turn[answered]
            del bounds[first + 1 :]
            for key, value in call_turn.items():
                if value > first:
                    call_turn[key] = first
    ends = [*bounds[1:], len(messages)]
    return [Turn(start, tuple(messages[start:end])) for start, end in zip(bounds, ends, strict=True)]


def extend_turns(
    turns: Sequence[Turn], messages: Sequence[common_pb2.ConversationMessage], shapes: Sequence[MessageShape]
) -> list[Turn]:
    """`split_turns(messages, shapes)`, given `turns`, the split of a prefix of `messages`: only
    the prefix's last turn and what follows are split again, unless a tool result there answers
    a call of an earlier turn (it merges turns), when the whole transcript is."""
    if not turns:
        return split_turns(messages, shapes)
    last = turns[-1].start
    tail_calls: set[str] = set()
    for shape in shapes[last:]:
        if shape.answers and shape.answers not in tail_calls:
            return split_turns(messages, shapes)
        tail_calls.update(shape.call_ids)
    tail = split_turns(messages[last:], shapes[last:])
    return [*turns[:-1], *(Turn(turn.start + last, turn.messages) for turn in tail)]
