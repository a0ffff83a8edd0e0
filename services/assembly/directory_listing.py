"""Directory pre-injection (`ov ls viking://`): a compact listing of what the user's OpenViking
space holds, so the model knows what it can read with its tools.

Three folders are listed: the user's resources, the user's memory categories, the skill space.
The engine's own folders (`resources/.contextengine`, `memories/ce-*`) and hidden files are left
out. Unasked, the listing goes in only at a stream's start and for a request of at least
`DIRECTORY_MIN_BUDGET` tokens. Each entry is
one line with its abstract cut to `ABSTRACT_CHARS`; lines go in while they fit the section.
The listing is cached per tenant (`TenantCache`, `DIRECTORY_TTL_SECONDS`) and dropped when the
tenant's memories change in this process (`MemoryChanges`) or skills are registered. Past its TTL
it is shown as it was while it is listed again after the answer (`DIRECTORY_STALE_SECONDS`): the
skill space's `ls` (50 entries with their abstracts) costs OpenViking more than a `find` (17 ms
against 10 on a quiet one, 70-87 ms beside the rest of an Assemble whose caches had all aged),
and a host asking once a minute met it on every stream's first call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextengine.v1 import packet_pb2

from services.assembly.tenant_cache import TenantCache
from shared.domain.skills import SKILL_ROOT
from shared.domain.turn_index_folders import FolderLister
from shared.errors import BackendNotFound
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

DIRECTORY_TTL_SECONDS = 60.0
DIRECTORY_STALE_SECONDS = 3600.0
"""How long past its TTL a listing is still shown while it is listed again; older, it is listed
first."""
LISTING_SECONDS = 10.0
"""Longest the three folders' listing may take (a call's own bound is shorter)."""
ABSTRACT_CHARS = 100
ENTRIES_PER_FOLDER = 50
DIRECTORY_HEADER = "[Your OpenViking space] What you can read with your tools:"
FOLDERS = (
    ("resources", "viking://~/resources"),
    ("memories", "viking://~/memories"),
    ("skills", SKILL_ROOT),
)


@dataclass(frozen=True)
class DirectorySection:
    text: str
    tokens: int
    entries: list[packet_pb2.DirectoryEntry]


DirectoryCache = TenantCache[str, list[packet_pb2.DirectoryEntry]]


def directory_cache(clock: Callable[[], float] = time.monotonic) -> DirectoryCache:
    return TenantCache(DIRECTORY_TTL_SECONDS, stale=DIRECTORY_STALE_SECONDS, clock=clock)


def _name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


async def _folder(
    reader: FolderLister, tenant: Tenant, kind: str, uri: str, deadline: float
) -> list[packet_pb2.DirectoryEntry]:
    try:
        listing = await reader.ls(tenant, uri, node_limit=ENTRIES_PER_FOLDER, deadline=deadline)
    except BackendNotFound:
        return []
    entries = []
    for entry in listing.entries:
        name = _name(entry.uri)
        if name.startswith((".", "ce-")):  # hidden, or the engine's own (its turn index)
            continue
        label = f"memories/{name}" if kind == "memories" and entry.is_dir else kind
        abstract = " ".join(entry.abstract.split())
        if "not ready]" in abstract:
            abstract = ""
        entries.append(
            packet_pb2.DirectoryEntry(uri=entry.uri, kind=label, abstract=abstract[:ABSTRACT_CHARS])
        )
    return entries


async def list_directory(reader: FolderLister, tenant: Tenant) -> list[packet_pb2.DirectoryEntry]:
    """The three folders' entries, read concurrently within `LISTING_SECONDS` (a missing folder
    lists nothing)."""
    deadline = time.monotonic() + LISTING_SECONDS
    folders = await asyncio.gather(*(_folder(reader, tenant, kind, uri, deadline) for kind, uri in FOLDERS))
    return [entry for folder in folders for entry in folder]


def render_directory(
    entries: Sequence[packet_pb2.DirectoryEntry], counter: TokenCounter, max_tokens: int
) -> DirectorySection:
    lines = [DIRECTORY_HEADER]
    shown: list[packet_pb2.DirectoryEntry] = []
    for entry in entries:
        line = f"- {entry.uri} [{entry.kind}]" + (f": {entry.abstract}" if entry.abstract else "")
        if counter.count("\n".join([*lines, line])) > max_tokens:
            break
        lines.append(line)
        shown.append(entry)
    if not shown:
        return DirectorySection("", 0, [])
    text = "\n".join(lines)
    return DirectorySection(text, counter.count(text), shown)
