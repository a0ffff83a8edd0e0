"""Who may see a memory: the engine's one memory scope model, as pure functions.

- USER memories (StoreMemory's default, and every memory OpenViking extracts) belong to the
  user: every agent of the user recalls them.
- AGENT memories belong to one agent: only a caller whose `agent_id` is exactly the writer's
  (case-sensitive, byte for byte) recalls them.

OpenViking 0.5.2 has no per-agent space, so the owner is recorded as tags on the memory file.
OpenViking lower-cases tags, so the agent id itself cannot be a tag value (`MAIN` would read
`main`'s memories, `ops@x` and `ops_x` would collide); the tag holds a hash of the exact id.
A memory without a scope tag (extracted by OpenViking, or written before this model) is USER.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache

from contextengine.v1 import packet_pb2

Scope = packet_pb2.MemoryScope
USER = packet_pb2.MEMORY_SCOPE_USER
AGENT = packet_pb2.MEMORY_SCOPE_AGENT
SCOPE_KEY = "ce_scope"
OWNER_KEY = "ce_agent"
AGENT_DIRECTORY_PREFIX = "agent-"
REMEMBERED_TAG_SETS = 4096


def agent_key(agent_id: str) -> str:
    """A lower-case, tag-safe key that differs for every distinct agent id (sha256, 128 bits)."""
    return hashlib.sha256(agent_id.encode("utf-8")).hexdigest()[:32]


def owner_tag(agent_id: str) -> str:
    """The tag every AGENT memory of `agent_id` carries (a find filter for that agent's own)."""
    return f"{OWNER_KEY}={agent_key(agent_id)}"


def scope_tags(scope: Scope.ValueType, agent_id: str) -> list[str]:
    """The tags to write on a memory of `scope` stored by `agent_id`."""
    if scope == AGENT:
        return [f"{SCOPE_KEY}=agent", owner_tag(agent_id)]
    return [f"{SCOPE_KEY}=user"]


def scope_directory(scope: Scope.ValueType, agent_id: str) -> str:
    """The sub-directory (inside the category's) for the memory file: "" for USER memories."""
    return f"{AGENT_DIRECTORY_PREFIX}{agent_key(agent_id)}" if scope == AGENT else ""


def _values(tags: Iterable[str], key: str) -> list[str]:
    values = []
    for tag in tags:
        name, eq, value = tag.partition("=")
        if eq and name.strip().lower() == key:
            values.append(value.strip().lower())
    return values


def visible_to(tags: Iterable[str], agent_id: str) -> Scope.ValueType | None:
    """The scope under which `agent_id` sees a memory with `tags`, or None when it may not.

    An AGENT memory is visible only to the agent whose key it carries; one whose owner tag is
    missing or malformed is visible to no one (never widened to the user).
    """
    return _visible_to(tuple(tags), agent_id)


@lru_cache(maxsize=REMEMBERED_TAG_SETS)
def _visible_to(tags: tuple[str, ...], agent_id: str) -> Scope.ValueType | None:
    """`visible_to`, remembered: recall asks it of the same few tag sets for every hit."""
    if "agent" not in _values(tags, SCOPE_KEY):
        return USER
    return AGENT if agent_key(agent_id) in _values(tags, OWNER_KEY) else None
