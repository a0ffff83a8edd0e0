"""The replica's SKILL.md texts (`SkillCatalogue`) on the real OpenViking, clock-driven: read
first when unknown or too old, shown while read again in the background once past their TTL."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from services.assembly.skill_selection import SkillCatalogue
from services.capture.skill_registry import register_skills
from shared.domain.documents import DocumentStore
from shared.domain.skills import Skill, skill_uri
from shared.openviking import DevAuth, OpenVikingClient, Tenant
from tests.assembly.helpers import RequestRecorder
from tests.support.stack import OpenVikingEndpoint

TTL, STALE = 60.0, 600.0
PDF = Skill("pdf-merge", "Merge several PDF files into one document", "Use qpdf to merge.", "skills/pdf")
DNS = Skill("dns-validate", "Validate a DNS record and report what is wrong", "Use dig.", "skills/dns")
URIS = [skill_uri(PDF.name), skill_uri(DNS.name)]
T = TypeVar("T")
POLLS = 1500
"""Asks, 20 ms apart, before a poll gives up (30 s)."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(openviking: OpenVikingEndpoint) -> AsyncIterator[tuple[OpenVikingClient, RequestRecorder]]:
    recorder = RequestRecorder()
    async with OpenVikingClient(openviking.base_url, DevAuth(), middlewares=[recorder]) as ov:
        yield ov, recorder


async def _register(ov: OpenVikingClient, tenant: Tenant, *skills: Skill) -> None:
    await register_skills(ov, DocumentStore(ov), tenant, list(skills), deadline=time.monotonic() + 120)


def _reads(recorder: RequestRecorder) -> list[str]:
    """The SKILL.md files read (registration reads documents of its own)."""
    return [r.uri for r in recorder.requests if r.path == "/api/v1/content/read" and r.uri in URIS]


async def _polled(ask: Callable[[], Awaitable[T]], until: Callable[[T], bool]) -> T:
    """`ask()` again (the clock standing still) until its answer satisfies `until`."""
    for _ in range(POLLS):
        answer = await ask()
        if until(answer):
            return answer
        await asyncio.sleep(0.02)
    raise AssertionError(f"still {answer!r} after {POLLS} asks")


@pytest.mark.stack
async def test_a_skill_past_its_ttl_is_shown_as_known_while_it_is_read_again(
    client: tuple[OpenVikingClient, RequestRecorder],
) -> None:
    ov, recorder = client
    tenant = Tenant(f"cat-{uuid.uuid4().hex[:8]}", "alice")
    await _register(ov, tenant, PDF, DNS)
    clock = Clock()
    catalogue = SkillCatalogue(TTL, clock, stale=STALE)

    async def descriptions() -> dict[str, str]:
        found = await catalogue.skills(ov, tenant, URIS, deadline=time.monotonic() + 30)
        return {uri: skill.description for uri, skill in found.items()}

    recorder.requests.clear()
    assert await descriptions() == {URIS[0]: PDF.description, URIS[1]: DNS.description}
    assert sorted(_reads(recorder)) == sorted(URIS)  # unknown: read before the answer
    clock.now += TTL - 1
    assert await descriptions() == {URIS[0]: PDF.description, URIS[1]: DNS.description}
    assert len(_reads(recorder)) == 2  # current: no read

    # Registered anew elsewhere (another replica, no invalidation here), then past the TTL: the
    # answer is the text known, and the file is read again beside it, once however often asked.
    changed = Skill(PDF.name, "Combine PDF files into one, keeping their bookmarks", PDF.body, PDF.host_uri)
    await _register(ov, tenant, changed)
    clock.now += 2
    first, second = await asyncio.gather(descriptions(), descriptions())
    assert first == second == {URIS[0]: PDF.description, URIS[1]: DNS.description}
    # Asked on while the reads run: the new text once its read is in, each file read once.
    await _polled(descriptions, lambda d: d[URIS[0]] == changed.description)
    await _polled(descriptions, lambda _: len(_reads(recorder)) == 4)
    assert sorted(_reads(recorder)[2:]) == sorted(URIS)

    # Removed, and then unasked for longer than the TTL and the stale window: read first.
    await ov.rm(tenant, URIS[1].rsplit("/", 1)[0], recursive=True)
    clock.now += TTL + STALE
    assert await descriptions() == {URIS[0]: changed.description}
    assert len(_reads(recorder)) == 6
    await catalogue.aclose()


@pytest.mark.stack
async def test_a_skill_removed_since_it_was_read_drops_out_after_its_background_read(
    client: tuple[OpenVikingClient, RequestRecorder],
) -> None:
    ov, _ = client
    tenant = Tenant(f"cat-{uuid.uuid4().hex[:8]}", "alice")
    await _register(ov, tenant, PDF, DNS)
    clock = Clock()
    catalogue = SkillCatalogue(TTL, clock, stale=STALE)
    deadline = time.monotonic() + 30
    assert set(await catalogue.skills(ov, tenant, URIS, deadline=deadline)) == set(URIS)
    await ov.rm(tenant, URIS[1].rsplit("/", 1)[0], recursive=True)
    clock.now += TTL

    async def names() -> set[str]:
        return set(await catalogue.skills(ov, tenant, URIS, deadline=deadline))

    assert await names() == set(URIS)  # shown as known while read again
    assert await _polled(names, lambda n: n != set(URIS)) == {URIS[0]}
    await catalogue.aclose()
