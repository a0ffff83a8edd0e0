"""What a claim's release adds to the stream state: its messages' user turns and tokens, and
the release itself (clear the claim, record the turn, add the counts), whoever writes it."""

from __future__ import annotations

from collections.abc import Sequence

from contextengine.v1 import common_pb2

from services.capture.releases import Release
from shared.domain.envelope import texts_of
from shared.domain.stream_state import PendingWrite, StreamState
from shared.tokens import TokenCounter

Role = common_pb2.MessageRole


def message_counts(
    messages: Sequence[common_pb2.ConversationMessage], counter: TokenCounter
) -> tuple[int, int]:
    """(user turns, tokens) of the messages."""
    turns = sum(1 for m in messages if m.role == Role.MESSAGE_ROLE_USER)
    tokens = sum(counter.count_message(texts_of(m)) for m in messages)
    return turns, tokens


def add_counts(state: StreamState, turns: int, tokens: int) -> None:
    state.turns_since_compaction += turns
    state.tokens_since_compaction += tokens
    state.active_tokens += tokens


def landed_release(held: PendingWrite, new_last: int, turns: int, tokens: int) -> Release:
    """The release of `held`, whose messages landed through `new_last` (`turns`, `tokens` of them)."""

    def release(current: StreamState) -> bool:
        if current.pending_write != held:
            return False  # released already, or repaired by another replica that counted it
        current.pending_write = None
        current.last_sequence = new_last
        current.unsettled = [u for u in current.unsettled if u.end_sequence > new_last]
        current.record_turn_progress(held, new_last, whole=True)
        add_counts(current, turns, tokens)
        return True

    return release
