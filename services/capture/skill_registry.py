"""RegisterSkills: the host's skills written into OpenViking's skill space, embedded for recall.

Each SKILL.md is one `content/write` (`processing_mode=vectors_only`: embedded, no LLM summary;
see `shared.domain.skills` for why this space and mode), `WRITE_CONCURRENCY` at a time:
OpenViking's batch write only takes resource or memory folders as its root. A skill whose
SKILL.md is unchanged since this user last registered it is not written again: the user's
registry document keeps each skill's sha256.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain.documents import ENGINE_ROOT, DocumentStore, sha256_text
from shared.domain.skills import Skill
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

REGISTRY_URI = f"{ENGINE_ROOT}/skills-registered.json"
WRITE_CONCURRENCY = 8


@dataclass(frozen=True)
class Registration:
    stored: int
    unchanged: int


async def register_skills(
    client: OpenVikingClient,
    store: DocumentStore,
    tenant: Tenant,
    skills: Sequence[Skill],
    *,
    deadline: float | None,
) -> Registration:
    document = await store.read(tenant, REGISTRY_URI, deadline=deadline)
    known: dict[str, str] = dict(document.data.get("skills", {})) if document is not None else {}
    changed = [s for s in skills if known.get(s.name) != sha256_text(s.skill_md())]
    gate = asyncio.Semaphore(WRITE_CONCURRENCY)

    async def write(skill: Skill) -> None:
        async with gate:
            await client.write(
                tenant,
                skill.uri,
                skill.skill_md(),
                wait=True,
                processing_mode="vectors_only",
                deadline=deadline,
            )

    await asyncio.gather(*(write(s) for s in changed))
    known.update({s.name: sha256_text(s.skill_md()) for s in changed})
    if changed:
        # Last writer wins: the registry only saves rewrites, a lost entry costs one rewrite.
        await store.write(tenant, REGISTRY_URI, {"skills": known}, deadline=deadline)
    return Registration(stored=len(changed), unchanged=len(skills) - len(changed))
