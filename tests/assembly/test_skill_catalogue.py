"""The replica's SKILL.md texts (`SkillCatalogue`) on the real OpenViking, clock-driven: read
first when unknown or too old, shown while read again in the background once past their TTL."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from services.assembly.skill_selection import SkillCatalogue
from services.capture.skill_registry import register_skills
from shared.domain.documents import DocumentStore
from shared.domain.skills import Skill, skill_uri
from shared.openviking import OpenVikingClient, Tenant
from tests.assembly.helpers import ManualClock, RequestRecorder, polled

TTL, STALE = 60.0, 600.0
PDF = Skill("pdf-merge", "Merge several PDF files into one document", "Use qpdf to merge.", "skills/pdf")
DNS = Skill("dns-validate", "Validate a DNS record and report what is wrong", "Use dig.", "skills/dns")
URIS = [skill_uri(PDF.name), skill_uri(DNS.name)]


async def _register(ov: OpenVikingClient, tenant: Tenant, *skills: Skill) -> None:
    await register_skills(ov, DocumentStore(ov), tenant, list(skills), deadline=time.monotonic() + 120)


@dataclass
class Catalogued:
    """Both skills registered for a tenant of its own, and a catalogue on a hand-moved clock."""

    ov: OpenVikingClient
    recorder: RequestRecorder
    tenant: Tenant
    clock: ManualClock
    catalogue: SkillCatalogue

    async def descriptions(self) -> dict[str, str]:
        found = await self.catalogue.skills(self.ov, self.tenant, URIS, deadline=time.monotonic() + 30)
        return {uri: skill.description for uri, skill in found.items()}

    def reads(self) -> list[str]:
        """The SKILL.md files read (registration reads documents of its own)."""
        return [r.uri for r in self.recorder.requests if r.path == "/api/v1/content/read" and r.uri in URIS]


@pytest.fixture
async def catalogued(
    recorded_client: tuple[OpenVikingClient, RequestRecorder],
) -> AsyncIterator[Catalogued]:
    ov, recorder = recorded_client
    tenant = Tenant(f"cat-{uuid.uuid4().hex[:8]}", "alice")
    await _register(ov, tenant, PDF, DNS)
    recorder.requests.clear()
    clock = ManualClock(1_000.0)
    catalogue = SkillCatalogue(TTL, clock, stale=STALE)
    yield Catalogued(ov, recorder, tenant, clock, catalogue)
    await catalogue.aclose()


@pytest.mark.stack
async def test_a_skill_past_its_ttl_is_shown_as_known_while_it_is_read_again(catalogued: Catalogued) -> None:
    c, descriptions = catalogued, catalogued.descriptions
    assert await descriptions() == {URIS[0]: PDF.description, URIS[1]: DNS.description}
    assert sorted(c.reads()) == sorted(URIS)  # unknown: read before the answer
    c.clock.now += TTL - 1
    assert await descriptions() == {URIS[0]: PDF.description, URIS[1]: DNS.description}
    assert len(c.reads()) == 2  # current: no read

    # Registered anew elsewhere (another replica, no invalidation here), then past the TTL: the
    # answer is the text known, and the file is read again beside it, once however often asked.
    changed = Skill(PDF.name, "Combine PDF files into one, keeping their bookmarks", PDF.body, PDF.host_uri)
    await _register(c.ov, c.tenant, changed)
    c.clock.now += 2
    first, second = await asyncio.gather(descriptions(), descriptions())
    assert first == second == {URIS[0]: PDF.description, URIS[1]: DNS.description}
    # Asked on while the reads run: the new text once its read is in, each file read once.
    await polled(descriptions, lambda d: d[URIS[0]] == changed.description)
    await polled(descriptions, lambda _: len(c.reads()) == 4)
    assert sorted(c.reads()[2:]) == sorted(URIS)

    # Removed, and then unasked for longer than the TTL and the stale window: read first.
    await c.ov.rm(c.tenant, URIS[1].rsplit("/", 1)[0], recursive=True)
    c.clock.now += TTL + STALE
    assert await descriptions() == {URIS[0]: changed.description}
    assert len(c.reads()) == 6


@pytest.mark.stack
async def test_a_skill_removed_since_it_was_read_drops_out_after_its_background_read(
    catalogued: Catalogued,
) -> None:
    c = catalogued
    assert set(await c.descriptions()) == set(URIS)
    await c.ov.rm(c.tenant, URIS[1].rsplit("/", 1)[0], recursive=True)
    c.clock.now += TTL
    assert set(await c.descriptions()) == set(URIS)  # shown as known while read again
    assert set(await polled(c.descriptions, lambda d: set(d) != set(URIS))) == {URIS[0]}
