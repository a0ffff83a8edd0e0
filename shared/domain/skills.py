"""Skill memory (design Phase 3): the host's skills in OpenViking's skill space, their uses per user.

Where they live, on measured grounds (OpenViking 0.5.2 without an LLM):

- `POST /api/v1/skills` and a default write into `viking://agent/skills` run OpenViking's semantic
  step, which needs an LLM: without one both fail ("Missing credentials"); user-scope
  `viking://~/skills` refuses `content/write` altogether. A write into `viking://agent/skills/<name>/
  SKILL.md` with `processing_mode=vectors_only` works LLM-free, is embedded and comes back from
  `find` as `context_type=skill`. So skills are account-wide (OpenViking has no per-agent space) and
  the SKILL.md keeps the host's front matter (name, description, uri) for the injection line.
- The uses a host reports (`used_skills`) are the user's own: one JSON document per user in the
  engine's folder (`DocumentStore`), the newest `USES_KEPT` per skill.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from contextengine.v1 import capture_pb2, envelope_pb2

from shared.domain.documents import ENGINE_ROOT, DocumentStore, DocumentUpdates
from shared.errors import InvalidArgument
from shared.openviking.tenant import Tenant

SKILL_ROOT = "viking://agent/skills"
SKILL_USES_URI = f"{ENGINE_ROOT}/skill-uses.json"
MAX_SKILLS_PER_CALL = 500
MAX_DESCRIPTION_CHARS = 1024
MAX_BODY_CHARS = 64 * 1024
MAX_HOST_URI_CHARS = 2048
USES_KEPT = 8
"""Newest uses remembered per skill (enough to say "failed 2 of the last 3")."""
MAX_USE_TEXT_CHARS = 300
MAX_USED_SKILLS = 64
"""Skill uses one turn may report."""
CAS_ATTEMPTS = 6

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.DOTALL)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    host_uri: str

    @property
    def uri(self) -> str:
        """The skill's SKILL.md in OpenViking."""
        return skill_uri(self.name)

    def skill_md(self) -> str:
        """The SKILL.md OpenViking stores and embeds: front matter, then the body."""
        return (
            f"---\nname: {self.name}\ndescription: {self.description}\nuri: {self.host_uri}\n---\n{self.body}"
        )


def skill_uri(name: str) -> str:
    return f"{SKILL_ROOT}/{name}/SKILL.md"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def validated_skills(definitions: Sequence[capture_pb2.SkillDefinition]) -> list[Skill]:
    """The request's skills, or InvalidArgument naming the first bad field."""
    if len(definitions) > MAX_SKILLS_PER_CALL:
        raise InvalidArgument("skills", f"at most {MAX_SKILLS_PER_CALL} per call, got {len(definitions)}")
    skills: dict[str, Skill] = {}
    for index, definition in enumerate(definitions):
        field = f"skills[{index}]"
        name = definition.name.strip().lower()
        if not _NAME.fullmatch(name):
            raise InvalidArgument(
                f"{field}.name", f"must match [a-z0-9][a-z0-9_-]{{0,63}}: {definition.name!r}"
            )
        if name in skills:
            raise InvalidArgument(f"{field}.name", f"{name!r} appears twice")
        description = _one_line(definition.description)
        if not description or len(description) > MAX_DESCRIPTION_CHARS:
            raise InvalidArgument(f"{field}.description", f"must be 1-{MAX_DESCRIPTION_CHARS} characters")
        if len(definition.body) > MAX_BODY_CHARS:
            raise InvalidArgument(f"{field}.body", f"is longer than {MAX_BODY_CHARS} characters")
        host_uri = definition.uri.strip()
        if len(host_uri) > MAX_HOST_URI_CHARS or "\n" in host_uri:
            raise InvalidArgument(
                f"{field}.uri", f"must be one line of at most {MAX_HOST_URI_CHARS} characters"
            )
        skills[name] = Skill(name, description, definition.body.replace("\x00", ""), host_uri)
    return list(skills.values())


def parse_skill_md(text: str) -> Skill | None:
    """The skill a stored SKILL.md holds, None when it is not one the engine wrote."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    name = fields.get("name", "")
    if not _NAME.fullmatch(name):
        return None
    return Skill(name, fields.get("description", ""), text[match.end() :], fields.get("uri", ""))


@dataclass(frozen=True)
class SkillUse:
    input: str
    success: bool | None
    at: str
    """UTC, "YYYY-MM-DD HH:MM"."""


def skill_name_of(uri: str) -> str:
    """The skill a reported use names: the engine's SKILL.md URI, its folder, or a bare name."""
    tail = uri.strip().removesuffix("/SKILL.md").rstrip("/")
    return tail.rsplit("/", 1)[-1].lower()


def uses_from_document(data: dict[str, Any]) -> dict[str, list[SkillUse]]:
    uses: dict[str, list[SkillUse]] = {}
    for name, records in data.get("skills", {}).items():
        uses[name] = [SkillUse(r.get("input", ""), r.get("success"), r.get("at", "")) for r in records]
    return uses


async def read_skill_uses(
    store: DocumentStore, tenant: Tenant, *, deadline: float | None = None
) -> dict[str, list[SkillUse]]:
    document = await store.read(tenant, SKILL_USES_URI, deadline=deadline)
    return uses_from_document(document.data) if document is not None else {}


async def record_skill_uses(
    updates: DocumentUpdates,
    tenant: Tenant,
    used: Sequence[envelope_pb2.UsedSkill],
    *,
    now: datetime | None = None,
    deadline: float | None = None,
) -> bool:
    """Append the turn's reported uses to the user's skill-use document (compare-and-swap); False
    when nothing was written."""
    if not used:
        return False
    at = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M")

    def apply(data: dict[str, Any]) -> dict[str, Any]:
        skills: dict[str, list[dict[str, Any]]] = dict(data.get("skills", {}))
        for use in used:
            name = skill_name_of(use.uri)
            if not name:
                continue
            record = {
                "input": _one_line(use.input)[:MAX_USE_TEXT_CHARS],
                "success": use.success if use.HasField("success") else None,
                "at": at,
            }
            skills[name] = [*skills.get(name, []), record][-USES_KEPT:]
        return {**data, "skills": skills}

    return await updates.change(tenant, SKILL_USES_URI, apply, attempts=CAS_ATTEMPTS, deadline=deadline)


def validate_used_skills(used: Sequence[envelope_pb2.UsedSkill], field: str = "used_skills") -> None:
    if len(used) > MAX_USED_SKILLS:
        raise InvalidArgument(field, f"at most {MAX_USED_SKILLS} per turn, got {len(used)}")
    for index, use in enumerate(used):
        if not skill_name_of(use.uri):
            raise InvalidArgument(f"{field}[{index}].uri", "is required")
