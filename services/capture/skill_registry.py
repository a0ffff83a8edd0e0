"""RegisterSkills: the host's skills written into OpenViking's skill space, embedded for recall.

Written as one batch (`processing_mode=vectors_only`: embedded, no LLM summary; see
`shared.domain.skills` for why this space and mode). A skill whose SKILL.md is unchanged since
this user last registered it is not written again: the user's registry document keeps each
skill's sha256.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from shared.domain.documents import ENGINE_ROOT, DocumentStore, sha256_text
from shared.domain.skills import SKILL_ROOT, Skill
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

REGISTRY_URI = f"{ENGINE_ROOT}/skills-registered.json"
BATCH_SIZE = 50
"""Skills per batch write (one index refresh each)."""


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
    for start in range(0, len(changed), BATCH_SIZE):
        batch = changed[start : start + BATCH_SIZE]
        await client.batch_write(
            tenant,
            SKILL_ROOT,
            [{"uri": s.uri, "content": s.skill_md(), "mode": "replace"} for s in batch],
            wait=True,
            processing_mode="vectors_only",
            deadline=deadline,
        )
        known.update({s.name: sha256_text(s.skill_md()) for s in batch})
    if changed:
        # Last writer wins: the registry only saves rewrites, a lost entry costs one rewrite.
        await store.write(tenant, REGISTRY_URI, {"skills": known}, deadline=deadline)
    return Registration(stored=len(changed), unchanged=len(skills) - len(changed))
