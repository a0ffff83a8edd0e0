from __future__ import annotations

import pytest

from services.assembly.assemble import recall_share
from services.assembly.injection import injected_recall_pair
from services.assembly.recall_query import recall_query, skip_reason_for
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


def test_prompt_is_the_query_in_a_continuing_session() -> None:
    # A long window of earlier user turns does not enter the query: the prompt alone drives it.
    history = [m for i in range(8) for m in (user(f"topic number {i} about databases"), assistant("ok"))]
    prompt = "which postgres version did we pick for the billing cluster"
    query = recall_query(reversed([*history, user(prompt)]), 5, prompt)
    assert query.skip_reason == "" and query.query == prompt
    # Same when the prompt is not yet in the transcript, or given only as the newest user turn.
    assert recall_query(reversed(history), 5, prompt).query == prompt
    newest = recall_query(reversed([*history, user("topic number 9 about storage engines")]), 5)
    assert newest.query == "topic number 9 about storage engines"


def test_thin_follow_up_borrows_the_previous_turn_only() -> None:
    messages = [
        user("tell me about the acme invoice dispute"),
        assistant("it is about invoice 4821"),
        user("who is the billing contact at globex"),
        assistant("Dana"),
        user("thanks!"),
        assistant("you are welcome"),
    ]
    # Fewer than three content words: the newest earlier non-greeting user turn gives the context.
    thin = recall_query(reversed(messages), 5, "and what about her?")
    assert thin.query == "who is the billing contact at globex\nand what about her?"
    # Outside the window there is nothing to borrow.
    assert recall_query(reversed(messages), 1, "and what about her?").query == "and what about her?"
    # A prompt with enough content words stands alone.
    full = recall_query(reversed(messages), 5, "what did dana say about the globex renewal")
    assert full.query == "what did dana say about the globex renewal"


def test_prompt_joins_window_when_not_yet_in_transcript() -> None:
    messages = [user("tell me about postgres indexes"), assistant("sure")]
    query = recall_query(reversed(messages), 5, "and what about vacuum tuning")
    assert query.query == "tell me about postgres indexes\nand what about vacuum tuning"
    same = recall_query(reversed(messages), 5, "tell me about postgres indexes")
    assert same.query == "tell me about postgres indexes"


def test_greeting_as_newest_turn_skips_even_with_history() -> None:
    messages = [user("tell me about postgres indexes"), assistant("sure"), user("thanks!")]
    assert recall_query(reversed(messages), 5).skip_reason == "greeting"


def test_no_user_turn_and_injected_messages_ignored() -> None:
    assert recall_query(reversed([assistant("hello")]), 5).skip_reason == "no_user_turn"
    call, result = injected_recall_pair("q", [], "abcdefghi")
    relevant = user("<relevant-memories>\n- [x] old\n</relevant-memories>\nwhere do I live these days")
    query = recall_query(reversed([relevant, call, result]), 5)
    assert query.query == "where do I live these days"


def test_query_capped_to_newest_text() -> None:
    query = recall_query(reversed([user("a" * 3000 + " tail words here")]), 1)
    assert len(query.query) == 2000 and query.query.endswith("tail words here")


def test_a_short_question_naming_what_it_asks_about_stands_alone() -> None:
    messages = [user("Great chatting with you, thanks for the tips on the garden"), assistant("Anytime!")]
    assert recall_query(reversed(messages), 5, "Where does Caroline volunteer?").query == (
        "Where does Caroline volunteer?"
    )
    assert recall_query(reversed(messages), 5, "What did she plant there?").query == (
        "Great chatting with you, thanks for the tips on the garden\nWhat did she plant there?"
    )


def test_a_prompt_leaning_on_earlier_turns_leaves_the_raw_window_more_room() -> None:
    messages = [user("Tell me about the Atlas database choice"), assistant("We picked Postgres.")]
    standalone = recall_query(reversed(messages), 5, "Which database did Atlas pick in March?")
    leaning = recall_query(reversed(messages), 5, "and why that one?")
    assert not standalone.leans_on_earlier and leaning.leans_on_earlier
    assert recall_share(0.9, standalone, 4000) == 0.9
    assert recall_share(0.9, standalone, 1000) == 1.0  # small: recall first, the window what is left
    assert recall_share(0.9, leaning, 1000) == recall_share(0.9, leaning, 4000) == 0.5
    assert recall_share(0.3, leaning, 4000) == 0.3  # never more than configured
