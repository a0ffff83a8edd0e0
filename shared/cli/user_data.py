"""`context-engine export-user | delete-user`: all of one user's data, out or gone.

Everything the engine keeps for a user lives in that user's OpenViking space (sessions with
their archives, memories including the turn index, and the engine's state documents under
`resources/.contextengine/`), so export walks that space and delete removes it. Run with the
engine's configuration (it names the OpenViking server and how to authenticate).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import TextIO

from shared.config import Settings
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.models.content import FsEntry
from shared.openviking.tenant import Tenant
from shared.runtime.context import build_openviking_client

USER_ROOT = "viking://~"
PAGE = 1000


async def _entries(openviking: OpenVikingClient, tenant: Tenant, uri: str) -> AsyncIterator[FsEntry]:
    """The entries directly in `uri` (hidden ones too), page by page; none when it is absent."""
    offset = 0
    while True:
        try:
            listing = await openviking.ls(tenant, uri, show_all_hidden=True, node_limit=PAGE, offset=offset)
        except BackendNotFound:
            return
        for entry in listing.entries:
            yield entry
        if not listing.has_more or not listing.entries:
            return
        offset += len(listing.entries)


async def _files(openviking: OpenVikingClient, tenant: Tenant, root: str) -> AsyncIterator[str]:
    """Every file under `root`. Walked folder by folder: OpenViking's recursive `ls` stops a few
    levels down (the turn index and the engine's checkpoints are deeper)."""
    folders = [root]
    while folders:
        async for entry in _entries(openviking, tenant, folders.pop()):
            if entry.is_dir:
                folders.append(entry.uri)
            else:
                yield entry.uri


async def export_user(settings: Settings, tenant: Tenant, out: TextIO = sys.stdout) -> int:
    """One JSON line per file of the user's space, `{"uri", "content"}`; returns the count."""
    count = 0
    async with build_openviking_client(settings) as openviking:
        async for uri in _files(openviking, tenant, USER_ROOT):
            content = await openviking.read(tenant, uri, raw=True)
            out.write(json.dumps({"uri": uri, "content": content}, ensure_ascii=False) + "\n")
            count += 1
    return count


async def delete_user(settings: Settings, tenant: Tenant, *, really: bool) -> list[str]:
    """The top-level folders of the user's space, removed when `really` (else only listed).

    Sessions go through OpenViking's session delete (their archives with them), the rest through
    a recursive remove; extracted and stored memories go with `memories/`.
    """
    async with build_openviking_client(settings) as openviking:
        sessions = [s.session_id for s in await openviking.list_sessions(tenant)]
        top = [entry.uri async for entry in _entries(openviking, tenant, USER_ROOT)]
        if really:
            for session_id in sessions:
                await openviking.delete_session(tenant, session_id)
            for uri in top:
                await openviking.rm(tenant, uri, recursive=True, wait=True)
    return [f"session {s}" for s in sessions] + top
