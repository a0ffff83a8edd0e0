from __future__ import annotations

import time

import pytest
from contextengine.v1 import packet_pb2
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.candidates import Candidate, agent_tag, category_of, merge_candidates, turn_candidate
from services.assembly.exchange_focus import folded_terms
from services.assembly.memory_rules import (
    query_tokens,
    rank_score,
    select_candidates,
    truncate_content,
)
from services.assembly.recall import (
    EXPLICIT_RECALL_TOKENS,
    SHOWN_HEADROOM,
    TURN_CANDIDATES,
    RecallConfig,
    RecalledItem,
    content_of,
    recall_memories,
    within_token_budget,
)
from services.assembly.recall_json import item_piece
from shared.config import Settings
from shared.domain.memory_scope import AGENT, agent_key, scope_tags
from shared.openviking import DevAuth, OpenVikingClient, RetryPolicy
from shared.tokens import TokenCounter
from tests.assembly.helpers import RequestRecorder, hit, seed, unique_tenant
from tests.support.lookalike_openviking import LookalikeOpenViking

M = "viking://user/alice/memories"
MEM = "viking://~/memories"
ONE_ATTEMPT = RetryPolicy(max_attempts=1)
COUNTER = TokenCounter("o200k_base")


def cand(uri: str, score: float, abstract: str = "", category: str = "") -> Candidate:
    return Candidate(
        uri=uri,
        abstract=abstract or uri,
        score=score,
        level=2,
        category=category or category_of(uri),
        scope=packet_pb2.MEMORY_SCOPE_USER,
    )


def config(**overrides: object) -> RecallConfig:
    values: dict[str, object] = {
        "limit": 6,
        "score_threshold": 0.15,
        "max_content_chars": 500,
        "prefer_abstract": True,
        "lexical_source": "candidates",
        "token_budget": 2000,
    }
    values.update(overrides)
    return RecallConfig(**values)  # type: ignore[arg-type]


def test_category_and_agent_tag() -> None:
    assert category_of(f"{M}/preferences/editor.md") == "preferences"
    assert category_of(f"{M}/profile.md") == "profile"
    assert category_of("viking://resources/x") == "memory"
    assert agent_tag("Main-Bot") == f"ce_agent={agent_key('Main-Bot')}" != agent_tag("main-bot")
    assert config(limit=2).candidate_limit == 20 and config(limit=7).candidate_limit == 28


def test_merge_dedupes_by_uri_keeps_level2_and_filters_other_agents() -> None:
    merged = merge_candidates(
        [
            [hit(f"{M}/a.md", 0.9, tags=scope_tags(AGENT, "main")), hit(f"{M}/dir", 0.99, level=1)],
            [
                hit(f"{M}/a.md", 0.5),
                hit(f"{M}/b.md", 0.4),
                hit(f"{M}/c.md", 0.8, tags=scope_tags(AGENT, "other")),
            ],
        ],
        "main",
    )
    assert [(c.uri, c.score, c.scope) for c in merged] == [
        (f"{M}/a.md", 0.9, packet_pb2.MEMORY_SCOPE_AGENT),
        (f"{M}/b.md", 0.4, packet_pb2.MEMORY_SCOPE_USER),
    ]
    assert merge_candidates([[hit(f"{M}/x.md", 1.7)]], "main")[0].score == 1.0
    # Agent ids are compared exactly: "Main" is another agent than "main".
    assert merge_candidates([[hit(f"{M}/a.md", 0.9, tags=scope_tags(AGENT, "main"))]], "Main") == []


def test_select_threshold_abstract_dedupe_events_by_uri_and_cap() -> None:
    cands = [
        cand(f"{M}/preferences/a.md", 0.5, "Likes  TEA"),
        cand(f"{M}/preferences/b.md", 0.6, "likes tea"),
        cand(f"{M}/events/e1.md", 0.7, "meeting"),
        cand(f"{M}/events/e2.md", 0.65, "meeting"),
        cand(f"{M}/entities/low.md", 0.1, "low"),
    ]
    kept = select_candidates(cands, 0.15, 20)
    assert [c.uri.rsplit("/", 1)[1] for c in kept] == ["e1.md", "e2.md", "b.md"]
    assert len(select_candidates(cands, 0.0, 2)) == 2


def test_rank_formula() -> None:
    pref = cand(f"{M}/preferences/editor.md", 0.5, "prefers vim editor")
    # leaf 0.12 + preference 0.08 + overlap: tokens [favorite, editor] -> 1 matched of 2 -> 0.1
    assert abs(rank_score(pref, "my favorite editor") - (0.5 + 0.12 + 0.08 + 0.1)) < 1e-9
    event = cand(f"{M}/events/trip.md", 0.5, "trip to paris")
    assert abs(rank_score(event, "when was the trip") - (0.5 + 0.12 + 0.10 + 0.2)) < 1e-9
    assert abs(rank_score(event, "???") - 0.62) < 1e-9
    assert query_tokens("The the Quick brown fox and a b c d e f g h i j k") == [
        "quick",
        "brown",
        "fox",
    ]
    assert len(query_tokens(" ".join(f"w{i}x" for i in range(20)))) == 8


def test_truncation() -> None:
    assert truncate_content("  short  ", 10) == "short"
    cut = truncate_content("x" * 50, 20)
    assert cut == "x" * 17 + "..." and len(cut) == 20


def test_token_budget_counts_real_tokens_and_always_keeps_first() -> None:
    items = [RecalledItem(cand(f"{M}/n/{i}.md", 0.9), 1.0, "word " * 100) for i in range(5)]
    line_tokens = COUNTER.count(item_piece(items[0].for_injection()))
    kept = list(within_token_budget(items, COUNTER, line_tokens * 2 + 1))
    assert len(kept) == 2 and [i.shown_as for i in kept] == [i.for_injection() for i in items[:2]]
    assert len(list(within_token_budget(items, COUNTER, 1))) == 1


@pytest.mark.stack
async def test_recall_end_to_end_against_openviking(
    recorded_client: tuple[OpenVikingClient, RequestRecorder],
) -> None:
    ov, transport = recorded_client
    tenant = unique_tenant("recall")
    await seed(
        ov,
        tenant,
        {
            f"{MEM}/preferences/editor.md": "User prefers vim",
            f"{MEM}/entities/cat.md": "User has a cat named Tom",
            f"{MEM}/entities/other.md": (
                "other agent memory: the user's editor is vim",
                scope_tags(AGENT, "else"),
            ),
            f"{MEM}/notes/main.md": ("body " * 300, scope_tags(AGENT, "main")),
        },
    )
    transport.requests.clear()
    outcome = await recall_memories(
        ov,
        tenant=tenant,
        agent_id="main",
        query="which editor do I prefer",
        config=config(max_content_chars=100),
        counter=COUNTER,
        deadline=time.monotonic() + 30,
    )
    assert outcome.degraded_reasons == []
    names = [i.candidate.uri.rsplit("/", 1)[1] for i in outcome.items]
    # Query-aware ranking puts the preference first; the agent's note is in (scope AGENT), the
    # other agent's memory and the directory overviews (level 1) are not.
    assert names[:2] == ["editor.md", "main.md"] and set(names) == {"editor.md", "main.md", "cat.md"}
    assert [i.rank for i in outcome.items] == sorted((i.rank for i in outcome.items), reverse=True)
    assert all(i.candidate.score >= 0.15 and i.candidate.level == 2 for i in outcome.items)
    scopes = {i.candidate.uri.rsplit("/", 1)[1]: i.candidate.scope for i in outcome.items}
    assert scopes["main.md"] == packet_pb2.MEMORY_SCOPE_AGENT
    assert scopes["editor.md"] == packet_pb2.MEMORY_SCOPE_USER
    # One find over the user's memories, turn index included (the query embedded once), texts
    # included; the agent filter applies to its hits (no second, tagged find).
    finds = transport.finds()
    assert len(finds) == 1
    assert finds[0]["target_uri"] == MEM and finds[0]["limit"] == TURN_CANDIDATES
    assert not finds[0].get("tags")
    assert not [r for r in transport.requests if r.path == "/api/v1/content/read"]
    # Abstracts preferred: the long note's abstract is cut to the per-item limit.
    notes = outcome.items[1]
    assert len(notes.content) == 100 and notes.content.endswith("...")

    # Bodies instead of abstracts: they come with the find (no reads), truncated the same way.
    transport.requests.clear()
    bodies = await recall_memories(
        ov, tenant=tenant, agent_id="main", query="which editor do I prefer",
        config=config(max_content_chars=100, prefer_abstract=False), counter=COUNTER,
        deadline=time.monotonic() + 30,
    )  # fmt: skip
    assert not [r for r in transport.requests if r.path == "/api/v1/content/read"]
    assert len(transport.finds()) == 1 and len(bodies.items) == 3
    main = next(i for i in bodies.items if i.candidate.uri.endswith("/notes/main.md"))
    assert main.content == ("body " * 300)[:97].rstrip() + "..."
    # The score threshold applies to what OpenViking returns.
    strict = await recall_memories(
        ov, tenant=tenant, agent_id="main", query="which editor do I prefer",
        config=config(score_threshold=0.999), counter=COUNTER, deadline=time.monotonic() + 30,
    )  # fmt: skip
    assert not strict.items and strict.degraded_reasons == []


async def test_recall_degrades_per_pass_and_on_timeout() -> None:
    """Both legs (semantic find and grep) degrade separately; the default lexical leg needs no call."""
    tenant = unique_tenant("down")
    with LookalikeOpenViking(status=503) as down:
        async with OpenVikingClient(down.base_url, DevAuth(), retry=ONE_ATTEMPT) as client:
            outcome = await recall_memories(
                client, tenant=tenant, agent_id="main", query="q words", config=config(lexical_source="grep"),
                counter=COUNTER, deadline=time.monotonic() + 5,
            )  # fmt: skip
    assert not outcome.items and len(outcome.degraded_reasons) == 2
    assert all("BackendUnavailable" in r for r in outcome.degraded_reasons), outcome.degraded_reasons
    with LookalikeOpenViking(delay=1.0) as slow:
        async with OpenVikingClient(slow.base_url, DevAuth(), retry=ONE_ATTEMPT) as client:
            started = time.monotonic()
            outcome = await recall_memories(
                client, tenant=tenant, agent_id="main", query="q words", config=config(lexical_source="grep"),
                counter=COUNTER, deadline=time.monotonic() + 0.1,
            )  # fmt: skip
            assert time.monotonic() - started < 0.5
    assert not outcome.items and len(outcome.degraded_reasons) == 2
    assert all("timed out" in r for r in outcome.degraded_reasons), outcome.degraded_reasons


@pytest.mark.parametrize(
    ("budget", "focused"), [(0, True), (1000, True), (4000, True), (8000, False), (64000, False)]
)
def test_recalled_exchanges_are_focused_while_room_is_short_and_whole_once_it_is_not(
    budget: int, focused: bool
) -> None:
    config = RecallConfig.from_settings(Settings(), budget=budget)
    assert config.focus_exchanges is focused
    exchange = turn_candidate(
        "viking://user/u/memories/ce-turns/s/0000001.md",
        "[2026-03-04 14:05] user: I finally picked an instrument: a secondhand ukulele from the market.\n"
        "[2026-03-04 14:06] assistant: Ha, lovely!",
        0.7,
    )
    shown = content_of(exchange, config, folded_terms(["instrument"]))
    assert ("lovely" in shown) is not focused
    assert "secondhand ukulele" in shown


@given(st.integers(0, 200_000), st.integers(0, 50_000))
def test_recall_offers_packing_more_than_fits_only_when_the_transcript_may_show_exchanges(
    budget: int, cap: int
) -> None:
    settings = Settings(recall_token_budget=cap)
    alone = RecallConfig.from_settings(settings, budget=budget, transcript_shows=False)
    shown = RecallConfig.from_settings(settings, budget=budget, transcript_shows=True)
    if budget:
        assert alone.token_budget == min(cap or budget, budget)
        assert shown.token_budget == alone.token_budget * SHOWN_HEADROOM
    else:  # explicit and fallback recall: the cap, or the upstream default
        assert shown.token_budget == alone.token_budget == (cap or EXPLICIT_RECALL_TOKENS)
