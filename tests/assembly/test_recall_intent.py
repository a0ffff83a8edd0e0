"""The recall intent stage as a pure function of the prompt and the newest messages."""

from __future__ import annotations

from contextengine.v1 import common_pb2, packet_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.recall_intent import (
    RecallSource,
    dates_in,
    is_answered_follow_up,
    names_in,
    recall_intent,
)
from services.assembly.recall_query import recall_query
from tests.bench.phase3_data import ASSISTANT_ANSWER, NEEDS_RECALL, NO_RECALL

Role = common_pb2.MessageRole


def message(role: common_pb2.MessageRole.ValueType, text: str) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        role=role, content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))]
    )


def answered(question: str = "How should we plan the party?") -> list[common_pb2.ConversationMessage]:
    """Newest first: an assistant answer to an earlier question."""
    return [message(Role.MESSAGE_ROLE_ASSISTANT, ASSISTANT_ANSWER), message(Role.MESSAGE_ROLE_USER, question)]


def tool_loop(user_text: str) -> list[common_pb2.ConversationMessage]:
    call = common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_ASSISTANT,
        content=[
            common_pb2.ContentBlock(
                tool_call=common_pb2.ToolCallBlock(
                    id="c1", name="read_file", arguments=common_pb2.JsonValue(json="{}")
                )
            )
        ],
    )
    return [call, message(Role.MESSAGE_ROLE_USER, user_text)]


def test_greetings_and_acknowledgements_need_no_recall() -> None:
    for prompt in ("hi there", "thanks!", "ok", "好的", "great, thank you"):
        intent = recall_intent(answered(), 5, prompt)
        assert not intent.recall, prompt
        assert intent.reason == "greeting"
        assert intent.sources == {RecallSource.SUMMARIES}


def test_a_follow_up_on_the_newest_answer_needs_no_recall() -> None:
    for prompt in (
        "make that shorter",
        "translate it into French",
        "explain the second point in more detail",
    ):
        intent = recall_intent(answered(), 5, prompt)
        assert (intent.recall, intent.reason) == (False, "follow_up"), prompt


def test_a_follow_up_with_no_answer_before_it_recalls() -> None:
    newest_first = [message(Role.MESSAGE_ROLE_USER, "earlier question about the venue budget")]
    assert recall_intent(newest_first, 5, "explain the second point in more detail").recall


def test_a_question_of_fact_is_never_a_follow_up() -> None:
    for prompt in NEEDS_RECALL:
        intent = recall_intent(answered(), 5, prompt)
        assert (
            intent.recall and intent.wants(RecallSource.MEMORIES) and intent.wants(RecallSource.EXCHANGES)
        ), prompt


def test_a_prompt_bringing_new_words_is_not_a_follow_up() -> None:
    assert not is_answered_follow_up("make that about the Berlin office instead", [ASSISTANT_ANSWER])
    assert is_answered_follow_up("make the second point shorter", [ASSISTANT_ANSWER])


def test_skills_and_tools_only_for_a_request_to_do_work() -> None:
    task = recall_intent(answered(), 5, "Can you merge these PDF files into one?")
    assert task.wants(RecallSource.SKILLS) and task.wants(RecallSource.TOOLS)
    past = recall_intent(answered(), 5, "What did I say my sister's name was?")
    assert not past.wants(RecallSource.SKILLS)
    small_talk = recall_intent(answered(), 5, "what do you think about cats?")
    assert small_talk.recall and not small_talk.wants(RecallSource.SKILLS)


def test_the_directory_at_the_start_of_a_stream_or_when_asked() -> None:
    first = recall_intent([], 5, "Can you summarise the report I uploaded?")
    assert first.wants(RecallSource.DIRECTORY)
    later = recall_intent(answered(), 5, "Can you summarise the report I uploaded?")
    assert not later.wants(RecallSource.DIRECTORY)
    asked = recall_intent(answered(), 5, "What do you know about my files?")
    assert asked.wants(RecallSource.DIRECTORY) and asked.directory_asked and not first.directory_asked


def test_tool_calls_in_the_newest_messages_keep_tool_memory_on_without_a_prompt() -> None:
    loop = recall_intent(tool_loop("Open the notes file"), 5, "")
    assert loop.wants(RecallSource.TOOLS) and loop.query == "Open the notes file"
    after_thanks = recall_intent(tool_loop("ok thanks"), 5, "")
    assert not after_thanks.recall
    assert after_thanks.sources == {RecallSource.SUMMARIES, RecallSource.TOOLS}


def test_dates_and_names_are_pulled_out() -> None:
    assert dates_in("What happened on 2026-05-14 and March 3rd, 2025, or 3 days ago?") == (
        "2026-05-14",
        "March 3rd, 2025",
        "3 days ago",
    )
    assert names_in('Did Marta Kowalski meet Tom at "Blue Fox" on Monday?') == (
        "Blue Fox",
        "Marta Kowalski",
        "Tom",
        "Monday",
    )
    intent = recall_intent([], 5, "When did Lena visit Porto last week?")
    assert intent.dates == ("last week",)
    assert intent.names == ("Lena", "Porto")


def test_the_packet_field_carries_the_decision() -> None:
    proto = recall_intent([], 5, "Can you merge the PDFs from yesterday?").to_proto()
    assert proto.recall and proto.query == "Can you merge the PDFs from yesterday?"
    assert packet_pb2.RECALL_SOURCE_SKILLS in proto.sources
    assert list(proto.dates) == ["yesterday"]


def test_auto_recall_off_decides_no_recall() -> None:
    assert (
        recall_intent([], 5, "What is my dentist's name?", auto_recall=False).reason == "auto_recall_disabled"
    )


def test_the_generated_stream_is_classified_as_labelled() -> None:
    for prompt in NO_RECALL:
        assert not recall_intent(answered(), 5, prompt).recall, prompt


_text = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), max_size=120)


@given(prompt=_text, earlier=_text)
def test_the_query_is_recall_querys_when_recall_runs(prompt: str, earlier: str) -> None:
    newest_first = [message(Role.MESSAGE_ROLE_ASSISTANT, "Sure."), message(Role.MESSAGE_ROLE_USER, earlier)]
    intent = recall_intent(newest_first, 5, prompt)
    base = recall_query(newest_first, 5, prompt)
    if intent.recall:
        assert intent.query == base.query and not intent.reason
        assert {RecallSource.MEMORIES, RecallSource.EXCHANGES} <= intent.sources
    else:
        assert intent.reason and not intent.query
        assert intent.sources <= {RecallSource.SUMMARIES, RecallSource.TOOLS}


@given(
    words=st.lists(
        st.sampled_from(["thanks", "ok", "hi", "cool", "great", "sure", "好的", "谢谢"]),
        min_size=1,
        max_size=4,
    )
)
def test_any_run_of_acknowledgements_needs_no_recall(words: list[str]) -> None:
    assert not recall_intent(answered(), 5, " ".join(words) + "!").recall


@given(name=st.from_regex(r"[A-Z][a-z]{3,9}", fullmatch=True))
def test_a_question_about_a_new_name_always_recalls(name: str) -> None:
    intent = recall_intent(answered(), 5, f"Who is {name} and when did we last talk about {name}?")
    assert intent.recall
    assert name in intent.names
