"""Explicit memories (docs/design.md §6.1): memory_store writes now, memory_forget deletes safely.

A stored memory is the file `memories/<category>/<name>.md` of the caller's own space (AGENT
scope: `memories/<category>/agent-<agent key>/<name>.md`), so the category is its directory:
`preferences` memories are among the user's preferences for the profile and recall ranking.
The file name is a slug of the text plus 8 hex of its sha256, so storing the same text twice in
the same category and scope is one memory. Who sees it is `shared.domain.memory_scope`.

Forgetting is confined to the caller's memories by the engine itself: in dev mode OpenViking
lets anyone act as anyone, so a URI outside `viking://~/memories/` or
`viking://user/<caller>/memories/` is refused before OpenViking sees it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime

from contextengine.v1 import packet_pb2

from shared.domain.identity import RequestIdentity
from shared.domain.memory_scope import AGENT, USER, scope_directory, scope_tags, visible_to
from shared.domain.stream_state import utc_now
from shared.domain.turn_index import said_tag
from shared.errors import BackendNotFound, InvalidArgument, PermissionDenied
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.search import SearchHit

MAX_MEMORY_CHARS = 20_000
MAX_SLUG_CHARS = 48
OWN_MEMORIES = "viking://~/memories"
FORGET_MIN_SCORE = 0.75
"""A query deletes only when its best match scores at least this..."""
FORGET_MIN_MARGIN = 0.1
"""...and beats the second best by at least this much."""
FORGET_CANDIDATES = 5
_SLUG_WORD = re.compile(r"[a-z0-9]+")
_UNSAFE_TAG_CHARS = re.compile(r"[^a-z0-9_.-]+")
RESERVED_CATEGORY_PREFIX = "ce-"
"""Memory directories the engine writes itself (the turn index, `ce-turns`)."""
_CATEGORY = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_USER_URI = re.compile(r"^viking://user/([^/]+)/memories/(.+)$")

Scope = packet_pb2.MemoryScope


@dataclass(frozen=True)
class StoredMemory:
    uri: str
    created: bool


@dataclass(frozen=True)
class ForgetOutcome:
    deleted_uris: list[str] = field(default_factory=list)
    candidates: list[packet_pb2.RecalledMemory] = field(default_factory=list)


def memory_slug(text: str) -> str:
    words = _SLUG_WORD.findall(text.lower())
    slug = ""
    for word in words:
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > MAX_SLUG_CHARS:
            break
        slug = candidate
    return slug or "memory"


def memory_uri(identity: RequestIdentity, text: str, category: str, scope: Scope.ValueType) -> str:
    name = f"{memory_slug(text)}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.md"
    directory = "/".join(d for d in (category, scope_directory(scope, identity.agent_id)) if d)
    return f"{OWN_MEMORIES}/{directory}/{name}"


def tag_value(value: str) -> str:
    """A tag value OpenViking keeps intact: lower case, `[a-z0-9_.-]` only."""
    return _UNSAFE_TAG_CHARS.sub("_", value.lower()).strip("_") or "none"


def memory_tags(
    identity: RequestIdentity, category: str, scope: Scope.ValueType, said: datetime
) -> list[str]:
    tags = [
        "source=memory_store",
        f"category={category}",
        *scope_tags(scope, identity.agent_id),
        said_tag(said),
    ]
    if identity.session_id:
        tags.append(f"session={tag_value(identity.session_id)}")
    return tags


@dataclass(frozen=True)
class MemoryRequest:
    """A checked StoreMemory request."""

    text: str
    category: str
    scope: Scope.ValueType


def check_store_request(text: str, category: str, scope: int) -> MemoryRequest:
    """Errors name the field; an unset scope is USER, an unknown one is refused."""
    if not text.strip():
        raise InvalidArgument("text", "is required")
    if len(text) > MAX_MEMORY_CHARS:
        raise InvalidArgument("text", f"is longer than {MAX_MEMORY_CHARS} characters")
    category = category or "notes"
    if not _CATEGORY.match(category):
        raise InvalidArgument("category", "must match [a-z][a-z0-9_-]{0,31}")
    if category.startswith(RESERVED_CATEGORY_PREFIX):
        raise InvalidArgument(
            "category", f"must not start with {RESERVED_CATEGORY_PREFIX!r} (the engine's own)"
        )
    if scope not in (packet_pb2.MEMORY_SCOPE_UNSPECIFIED, USER, AGENT):
        raise InvalidArgument("scope", "must be MEMORY_SCOPE_USER or MEMORY_SCOPE_AGENT")
    return MemoryRequest(text.strip(), category, AGENT if scope == AGENT else USER)


async def store_memory(
    ov: OpenVikingClient,
    identity: RequestIdentity,
    memory: MemoryRequest,
    *,
    deadline: float | None = None,
) -> StoredMemory:
    """Write the memory now (indexed on return); an identical memory is kept, not rewritten."""
    uri = memory_uri(identity, memory.text, memory.category, memory.scope)
    try:
        existing = await ov.stat(identity.tenant, uri, deadline=deadline)
        return StoredMemory(uri=existing.uri or _canonical(identity, uri), created=False)
    except BackendNotFound:
        pass
    tags = memory_tags(identity, memory.category, memory.scope, utc_now())
    result = await ov.write(identity.tenant, uri, memory.text, wait=True, tags=tags, deadline=deadline)
    return StoredMemory(uri=result.uri, created=True)


def _canonical(identity: RequestIdentity, uri: str) -> str:
    return uri.replace("viking://~/", f"viking://user/{identity.tenant.user_id}/", 1)


def checked_forget_uri(identity: RequestIdentity, uri: str, field: str = "uri") -> str:
    """The URI if the caller may delete it: a file among the caller's own memories."""
    if not uri.startswith("viking://"):
        raise InvalidArgument(field, "must be a viking:// memory URI")
    if any(ch in uri for ch in "?#\\\x00") or any(
        seg in ("..", ".") for seg in uri[len("viking://") :].split("/")
    ):
        raise InvalidArgument(field, "must be a plain memory file URI")
    if uri.startswith(OWN_MEMORIES + "/"):
        rest = uri[len(OWN_MEMORIES) + 1 :]
    else:
        match = _USER_URI.match(uri)
        if match is None:
            if uri.startswith("viking://user/") or uri.startswith("viking://~/"):
                raise PermissionDenied(f"{field}: only the caller's own memories can be forgotten")
            raise InvalidArgument(
                field, "must be under viking://~/memories/ or viking://user/<you>/memories/"
            )
        if match.group(1) != identity.tenant.user_id:
            raise PermissionDenied(f"{field}: only the caller's own memories can be forgotten")
        rest = match.group(2)
    if not rest or rest.endswith("/") or "//" in rest:
        raise InvalidArgument(field, "must name a memory file")
    return uri


def _category_of(uri: str) -> str:
    marker = "/memories/"
    if marker not in uri:
        return ""
    rest = uri.split(marker, 1)[1]
    return rest.split("/", 1)[0] if "/" in rest else ""


def recalled(query: str, hit: SearchHit, scope: Scope.ValueType) -> packet_pb2.RecalledMemory:
    return packet_pb2.RecalledMemory(
        query=query,
        uri=hit.uri,
        abstract=hit.abstract,
        score=hit.score,
        category=_category_of(hit.uri),
        content=hit.abstract,
        scope=scope,
        tags=list(hit.tags),
    )


async def forget_by_uri(
    ov: OpenVikingClient, identity: RequestIdentity, uri: str, *, deadline: float | None = None
) -> ForgetOutcome:
    """Delete one memory the caller sees (another agent's AGENT memory is refused)."""
    checked = checked_forget_uri(identity, uri)
    try:
        attrs = await ov.attrs(identity.tenant, checked, deadline=deadline)
    except BackendNotFound:
        return ForgetOutcome()
    if visible_to(attrs.tags, identity.agent_id) is None:
        raise PermissionDenied("uri: the memory belongs to another agent")
    removed = await ov.rm(identity.tenant, checked, deadline=deadline)
    if removed.estimated_deleted_count <= 0:
        return ForgetOutcome()
    return ForgetOutcome(deleted_uris=[removed.uri or _canonical(identity, checked)])


def unambiguous_match(hits: list[SearchHit]) -> SearchHit | None:
    """The single hit a query clearly means, or None."""
    if not hits:
        return None
    ranked = sorted(hits, key=lambda h: h.score, reverse=True)
    top = ranked[0]
    if top.score < FORGET_MIN_SCORE:
        return None
    if len(ranked) > 1 and top.score - ranked[1].score < FORGET_MIN_MARGIN:
        return None
    return top


async def forget_by_query(
    ov: OpenVikingClient, identity: RequestIdentity, query: str, *, deadline: float | None = None
) -> ForgetOutcome:
    if not query.strip():
        raise InvalidArgument("query", "is required")
    found = await ov.find(
        identity.tenant, query, target_uri=OWN_MEMORIES, level=2, limit=FORGET_CANDIDATES, deadline=deadline
    )
    scoped = [(h, visible_to(h.tags, identity.agent_id)) for h in found.memories if h.level == 2]
    visible = {h.uri: scope for h, scope in scoped if scope is not None}
    hits = [h for h in found.memories if h.uri in visible]
    match = unambiguous_match(hits)
    if match is None:
        ranked = sorted(hits, key=lambda h: h.score, reverse=True)
        return ForgetOutcome(candidates=[recalled(query, h, visible[h.uri]) for h in ranked])
    return await forget_by_uri(ov, identity, match.uri, deadline=deadline)
