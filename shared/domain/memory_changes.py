"""In-process notice that a user's memories may have changed.

StoreMemory, ForgetMemory and a session commit (whose phase 2 may extract memories) announce
the tenant here; caches of what is derived from memories (the assembly replica's profile)
listen and drop that tenant's entries. Only services of the same process hear it: replicas in
other processes rely on their cache's TTL instead (`services.assembly.profile`).
"""

from __future__ import annotations

from collections.abc import Callable

from shared.openviking.tenant import Tenant

Listener = Callable[[Tenant], None]


class MemoryChanges:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def changed(self, tenant: Tenant) -> None:
        for listener in self._listeners:
            listener(tenant)
