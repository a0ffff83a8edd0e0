"""The skill, tool and directory sections as pure functions: ranking, failure notes, lessons,
and the token bound each section keeps."""

from __future__ import annotations

from contextengine.v1 import packet_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.directory_listing import render_directory
from services.assembly.skill_selection import MIN_SKILL_SCORE, failure_note, ranked_candidates, render_skills
from services.assembly.tool_memory import render_tools
from shared.domain.skills import Skill, SkillUse, parse_skill_md
from shared.domain.tool_experience import ToolOutcome, ToolRecord, arguments_shape, learned
from shared.tokens import TokenCounter

COUNTER = TokenCounter.for_model("", "cl100k_base")
_words = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=80)
_skills = st.builds(
    Skill,
    name=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    description=_words,
    body=st.text(max_size=400),
    host_uri=st.just("skills/x/SKILL.md"),
)


def test_a_skill_md_round_trips() -> None:
    skill = Skill("pdf-merge", "Merge PDFs", "# pdf-merge\nUse qpdf.", "skills/pdf-merge/SKILL.md")
    assert parse_skill_md(skill.skill_md()) == skill
    assert parse_skill_md("no front matter") is None


def test_no_skill_below_the_floor_and_a_named_skill_is_lifted() -> None:
    low = Skill("dns-validate", "Validate DNS", "", "")
    assert ranked_candidates("tell me a joke", [(low, MIN_SKILL_SCORE - 0.01)]) == []
    pdf = Skill("pdf-merge", "Merge PDFs", "", "")
    ranked = ranked_candidates("use the pdf merge skill", [(low, 0.7), (pdf, 0.62)])
    assert ranked[0].skill.name == "pdf-merge"


def test_a_failure_is_told_only_for_a_similar_input() -> None:
    uses = [
        SkillUse("merge scanned invoices", False, "2026-05-01 10:00"),
        SkillUse("merge slides", True, "x"),
    ]
    assert failure_note("merge the scanned invoices", uses).startswith("failed 1 of the last 1 uses")
    assert failure_note("convert a video", uses) == ""


@given(skills=st.lists(_skills, max_size=6, unique_by=lambda s: s.name), cap=st.integers(0, 400))
def test_the_skill_section_never_passes_its_tokens(skills: list[Skill], cap: int) -> None:
    candidates = ranked_candidates("abc", [(s, 0.9) for s in skills])
    section = render_skills("abc", candidates, {}, COUNTER, cap)
    assert section.tokens == (COUNTER.count(section.text) if section.text else 0) <= cap
    assert len(section.skills) <= len(candidates)


@given(
    outcomes=st.lists(
        st.builds(
            ToolOutcome,
            tool_name=st.sampled_from(["a", "b"]),
            arguments_shape=_words,
            error=st.sampled_from(["", "boom"]),
        ),
        max_size=12,
    )
)
def test_lessons_count_failures_and_keep_the_fix_after_the_newest_one(outcomes: list[ToolOutcome]) -> None:
    records = learned({}, outcomes)
    for name, record in records.items():
        mine = [o for o in outcomes if o.tool_name == name]
        assert record.failures == sum(1 for o in mine if o.error)
        failures = [i for i, o in enumerate(mine) if o.error]
        if failures:
            after = [o for o in mine[failures[-1] + 1 :] if not o.error]
            assert record.fix_arguments == (after[0].arguments_shape if after else "")
            assert record.awaiting_fix == (not after)


def test_an_argument_shape_has_keys_and_types_never_values() -> None:
    shape = arguments_shape('{"path": "/secret/file", "limit": 10, "tags": ["a"], "deep": {"on": true}}')
    assert shape == '{"deep": {"on": boolean}, "limit": number, "path": string, "tags": array<string>}'
    assert "secret" not in shape


@given(cap=st.integers(0, 300))
def test_tool_and_directory_sections_never_pass_their_tokens(cap: int) -> None:
    records = {
        f"t{i}": ToolRecord(f"t{i}", error="boom " * i, failures=1, awaiting_fix=True) for i in range(6)
    }
    tools = render_tools(list(records), records, COUNTER, cap)
    assert tools.tokens <= cap and len(tools.experience) <= 4
    entries = [
        packet_pb2.DirectoryEntry(uri=f"viking://user/u/resources/r{i}", kind="resources", abstract="x" * i)
        for i in range(30)
    ]
    listing = render_directory(entries, COUNTER, cap)
    assert listing.tokens <= cap
