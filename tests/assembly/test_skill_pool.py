"""Skills riding on recall's find (`skill_pool`): when the pool is complete, what the one find
asks for, and the skill stage's own find when the pool may lack a skill, on the real OpenViking."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from services.assembly.exchange_index import ExchangeIndex
from services.assembly.pool_depth import HEADROOM, PoolDepths
from services.assembly.recall import TURN_CANDIDATES, RecallConfig, recall_memories
from services.assembly.skill_pool import SKILL_FLOOR, SkillPool, pool_find, pool_skills
from services.assembly.skill_selection import SKILL_CANDIDATES, SkillCatalogue, skill_hits
from services.capture.skill_registry import register_skills
from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.skills import SKILL_ROOT, Skill, skill_uri
from shared.openviking import OpenVikingClient, Tenant
from shared.openviking.models.search import FindResult, SearchHit
from shared.tokens import TokenCounter
from tests.assembly.helpers import RequestRecorder, hit, seed

MEM = "viking://~/memories"
LIMIT = TURN_CANDIDATES + SKILL_CANDIDATES
COUNTER = TokenCounter("o200k_base")
CONFIG = RecallConfig.from_settings(Settings(), limit=6)
SKILLS = [
    Skill("pdf-merge", "Merge several PDF files into one document", "Use qpdf to merge.", "skills/pdf"),
    Skill("dns-validate", "Validate a DNS record and report what is wrong", "Use dig.", "skills/dns"),
]


def skill_hit(name: str, score: float, level: int = 2) -> SearchHit:
    return hit(skill_uri(name), score, level=level)


def memories(count: int, score: float) -> list[SearchHit]:
    return [hit(f"viking://user/u/memories/notes/{i}.md", score) for i in range(count)]


async def test_recall_alone_finds_over_memories_and_with_a_pool_over_the_skill_space_too() -> None:
    assert pool_find(MEM, TURN_CANDIDATES, None) == (MEM, TURN_CANDIDATES)
    pool: SkillPool = asyncio.get_running_loop().create_future()
    assert pool_find(MEM, TURN_CANDIDATES, pool) == ([MEM, SKILL_ROOT], LIMIT)


def test_a_pool_is_complete_when_no_skill_that_could_be_shown_can_be_missing() -> None:
    two = [skill_hit("pdf-merge", 0.7), skill_hit("pdf-clean", 0.6)]
    # Fewer hits than the limit: everything the two roots hold came back.
    assert pool_skills(FindResult(memories=memories(50, 0.9), skills=two), LIMIT) == two
    # Full, but holding SKILL_CANDIDATES skills: the best ones are all in (one ranking).
    many = [skill_hit(f"s-{i}", 0.9 - i / 100) for i in range(SKILL_CANDIDATES + 2)]
    full_of_skills = FindResult(memories=memories(LIMIT - len(many), 0.95), skills=many)
    assert pool_skills(full_of_skills, LIMIT) == many[:SKILL_CANDIDATES]
    # Full, its last hit below what any shown skill scores: nothing showable was left out.
    low_tail = [*memories(LIMIT - 3, 0.8), hit("viking://user/u/memories/last.md", SKILL_FLOOR - 0.01)]
    assert pool_skills(FindResult(memories=low_tail, skills=two), LIMIT) == two
    # Full, fewer skills than asked for, memories scoring like skills down to its last hit: a
    # skill just below that hit could be shown, so the pool is not complete.
    crowded = FindResult(memories=memories(LIMIT - 2, SKILL_FLOOR + 0.1), skills=two)
    assert pool_skills(crowded, LIMIT) is None


def test_a_learned_depth_stands_while_fresh_and_unchanged_and_only_from_a_page_not_full() -> None:
    now = [0.0]
    depths = PoolDepths(ttl=30, clock=lambda: now[0])
    user, other = Tenant("a", "u1"), Tenant("a", "u2")
    assert depths.depth(user, TURN_CANDIDATES) == TURN_CANDIDATES  # nothing learned yet
    # A full page says nothing about what the root holds.
    depths.learn(user, FindResult(memories=memories(3, 0.9), skills=[skill_hit("s", 0.8)] * 5), 8)
    assert depths.depth(user, TURN_CANDIDATES) == TURN_CANDIDATES
    depths.learn(user, FindResult(memories=memories(3, 0.9), skills=[skill_hit("s", 0.8)]), 8)
    assert depths.depth(user, TURN_CANDIDATES) == 3 + HEADROOM
    assert depths.depth(other, TURN_CANDIDATES) == TURN_CANDIDATES
    depths.learn(other, FindResult(memories=memories(190, 0.9)), LIMIT)
    assert depths.depth(other, TURN_CANDIDATES) == TURN_CANDIDATES  # never past the full depth
    now[0] = 29.9
    assert depths.depth(user, TURN_CANDIDATES) == 3 + HEADROOM
    depths.forget(user)
    assert depths.depth(user, TURN_CANDIDATES) == TURN_CANDIDATES
    depths.learn(user, FindResult(memories=memories(3, 0.9)), 8)
    now[0] = 59.9
    assert depths.depth(user, TURN_CANDIDATES) == TURN_CANDIDATES  # stale


def test_a_pool_holds_skill_files_only() -> None:
    found = FindResult(skills=[skill_hit("a", 0.9, level=1), skill_hit("b", 0.8), skill_hit("c", 0.7)])
    assert [h.uri for h in pool_skills(found, LIMIT) or []] == [skill_uri("b"), skill_uri("c")]


@pytest.fixture
async def tenant(recorded_client: tuple[OpenVikingClient, RequestRecorder]) -> Tenant:
    ov, _ = recorded_client
    tenant = Tenant(f"pool-{uuid.uuid4().hex[:8]}", "alice")
    await register_skills(ov, DocumentStore(ov), tenant, SKILLS, deadline=time.monotonic() + 120)
    await seed(ov, tenant, {f"{MEM}/notes/qpdf.md": "I installed qpdf on the build server last week."})
    return tenant


@pytest.mark.stack
async def test_recall_brings_the_skills_along_in_its_one_find(
    recorded_client: tuple[OpenVikingClient, RequestRecorder], tenant: Tenant
) -> None:
    ov, recorder = recorded_client
    recorder.requests.clear()
    pool: SkillPool = asyncio.get_running_loop().create_future()
    outcome = await recall_memories(
        ov, tenant=tenant, agent_id="main", query="Can you combine these two PDFs into one file?",
        config=CONFIG, counter=COUNTER, deadline=time.monotonic() + 30, skill_pool=pool,
    )  # fmt: skip
    finds = recorder.finds()
    assert len(finds) == 1
    assert finds[0]["target_uri"] == [MEM, SKILL_ROOT] and finds[0]["limit"] == LIMIT
    pooled = pool.result()
    assert pooled is not None and pooled[0].uri == skill_uri("pdf-merge")
    # Recall's own result is the user's memory only: skills are no memories.
    assert [i.candidate.uri.rsplit("/", 1)[1] for i in outcome.items] == ["qpdf.md"]


@pytest.mark.stack
async def test_a_query_recall_narrows_leaves_the_skills_their_own_find(
    recorded_client: tuple[OpenVikingClient, RequestRecorder], tenant: Tenant
) -> None:
    ov, recorder = recorded_client
    index = ExchangeIndex(ov)
    await index.sync(tenant)  # synced: "Lena" is a name the user's history never says
    recorder.requests.clear()
    pool: SkillPool = asyncio.get_running_loop().create_future()
    await recall_memories(
        ov, tenant=tenant, agent_id="main", query="Can you combine the PDFs Lena sent into one?",
        config=CONFIG, counter=COUNTER, deadline=time.monotonic() + 30, exchanges=index,
        skill_pool=pool,
    )  # fmt: skip
    await index.aclose()
    # Recall embeds the query without the name; the skills' query keeps it, so the pool stays empty.
    assert pool.result() is None
    assert [(f["target_uri"], f["limit"]) for f in recorder.finds()] == [(MEM, TURN_CANDIDATES)]
    assert "Lena" not in recorder.finds()[0]["query"]


@pytest.mark.stack
async def test_the_skill_stage_finds_on_its_own_when_the_pool_may_lack_a_skill(
    recorded_client: tuple[OpenVikingClient, RequestRecorder], tenant: Tenant
) -> None:
    ov, recorder = recorded_client
    recorder.requests.clear()
    pool: SkillPool = asyncio.get_running_loop().create_future()
    pool.set_result(None)
    found = await skill_hits(
        ov, tenant, "Please check my DNS record for errors", SkillCatalogue(), pooled=pool,
        deadline=time.monotonic() + 30,
    )  # fmt: skip
    assert found[0][0].name == "dns-validate"
    assert [(f["target_uri"], f["limit"]) for f in recorder.finds()] == [(SKILL_ROOT, SKILL_CANDIDATES)]


@pytest.mark.stack
async def test_a_small_users_shared_find_asks_for_its_size_and_again_in_full_once_it_outgrows_it(
    recorded_client: tuple[OpenVikingClient, RequestRecorder], tenant: Tenant
) -> None:
    ov, recorder = recorded_client
    depths = PoolDepths()

    async def recall() -> tuple[list[str], list[str], list[int]]:
        mark = len(recorder.requests)
        pool: SkillPool = asyncio.get_running_loop().create_future()
        outcome = await recall_memories(
            ov, tenant=tenant, agent_id="main", query="Can you combine these two PDFs into one file?",
            config=CONFIG, counter=COUNTER, deadline=time.monotonic() + 30, skill_pool=pool,
            depths=depths,
        )  # fmt: skip
        pooled = pool.result() or []
        limits = [r.body["limit"] for r in recorder.requests[mark:] if r.path == "/api/v1/search/find"]
        return [i.candidate.uri for i in outcome.items], [h.uri for h in pooled], limits

    first = await recall()
    assert first[2] == [LIMIT]  # nothing known yet: the full depth
    second = await recall()
    # One memory: asked for it and the headroom beside the skills, with the same outcome.
    assert second[2] == [1 + HEADROOM + SKILL_CANDIDATES]
    assert second[:2] == first[:2] and first[1][0] == skill_uri("pdf-merge")
    # The user outgrows the headroom: a full page, the memory side filling its share; recall asks
    # again in full.
    added = HEADROOM + SKILL_CANDIDATES
    notes = {f"{MEM}/notes/pdf-{i}.md": f"PDF tool note {i}: merge with qpdf" for i in range(added)}
    await seed(ov, tenant, notes)
    grown = await recall()
    assert grown[2] == [1 + HEADROOM + SKILL_CANDIDATES, LIMIT]
    assert any("/notes/pdf-" in uri for uri in grown[0]) and grown[1] == first[1]
    assert (await recall())[2] == [1 + added + HEADROOM + SKILL_CANDIDATES]
    # Without the skill space the depth changes nothing: recall asks in full.
    mark = len(recorder.requests)
    await recall_memories(
        ov, tenant=tenant, agent_id="main", query="qpdf", config=CONFIG, counter=COUNTER,
        deadline=time.monotonic() + 30, depths=depths,
    )  # fmt: skip
    assert [f["limit"] for f in recorder.finds()[-1:]] == [TURN_CANDIDATES] and len(recorder.requests) > mark
