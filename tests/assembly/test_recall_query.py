from __future__ import annotations

import pytest

from services.assembly.injection import injected_recall_pair
from services.assembly.recall_query import recall_query_from_window, skip_reason_for
from tests.assembly.helpers import assistant, user


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ?!  ", "empty"),
        ("hi", "greeting"),
        ("Hello there!", "greeting"),
        ("thanks a lot", "greeting"),
        ("你好", "greeting"),
        ("谢谢\uff01", "greeting"),
        ("ok?", "greeting"),
        ("abc", "too_short"),
        ("猫", "too_short"),
        ("我喜欢猫", ""),
        ("what is my favourite editor", ""),
    ],
)
def test_skip_rules(text: str, reason: str) -> None:
    assert skip_reason_for(text) == reason


def test_query_uses_last_window_user_turns() -> None:
    messages = [user(f"topic number {i} about databases") for i in range(8)]
    query = recall_query_from_window(messages, 3, "")
    assert query.skip_reason == ""
    assert query.query.splitlines() == [f"topic number {i} about databases" for i in (5, 6, 7)]


def test_prompt_joins_window_when_not_yet_in_transcript() -> None:
    messages = [user("tell me about postgres indexes"), assistant("sure")]
    query = recall_query_from_window(messages, 5, "and what about vacuum tuning")
    assert query.query == "tell me about postgres indexes\nand what about vacuum tuning"
    same = recall_query_from_window(messages, 5, "tell me about postgres indexes")
    assert same.query == "tell me about postgres indexes"


def test_greeting_as_newest_turn_skips_even_with_history() -> None:
    messages = [user("tell me about postgres indexes"), assistant("sure"), user("thanks!")]
    assert recall_query_from_window(messages, 5).skip_reason == "greeting"


def test_no_user_turn_and_injected_messages_ignored() -> None:
    assert recall_query_from_window([assistant("hello")], 5).skip_reason == "no_user_turn"
    call, result = injected_recall_pair("q", [], "abcdefghi")
    relevant = user("<relevant-memories>\n- [x] old\n</relevant-memories>\nwhere do I live these days")
    query = recall_query_from_window([relevant, call, result], 5)
    assert query.query == "where do I live these days"


def test_query_capped_to_newest_text() -> None:
    query = recall_query_from_window([user("a" * 3000 + " tail words here")], 1)
    assert len(query.query) == 2000 and query.query.endswith("tail words here")
