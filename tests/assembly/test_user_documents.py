"""The user's skill-use and tool-experience documents past their TTL, on the real OpenViking: kept
while the engine folder's listing shows them as they were read, read again once changed."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest

from services.assembly.tenant_cache import TenantCache
from services.assembly.user_documents import DOCUMENT_SETTLE_SECONDS, EngineFolder, UserDocument
from shared.domain.skills import SKILL_USES_URI
from shared.domain.tool_experience import TOOL_EXPERIENCE_URI
from shared.openviking import OpenVikingClient
from tests.assembly.helpers import ManualClock, RequestRecorder, unique_tenant

TTL = 30.0


@dataclass
class Documents:
    ov: OpenVikingClient
    recorder: RequestRecorder
    clock: ManualClock
    cache: TenantCache[str, UserDocument]
    ahead: float = 0.0
    """Seconds this process's wall clock is moved on (what the settle window is judged by)."""

    def __post_init__(self) -> None:
        self.tenant = unique_tenant("docs")

    async def call(self) -> tuple[dict[str, object], dict[str, object]]:
        """Both documents as one Assemble reads them, the requests it sent noted afresh."""
        self.recorder.requests.clear()
        folder = EngineFolder(
            self.ov, self.tenant, time.monotonic() + 30, now=lambda: time.time() + self.ahead
        )
        return (
            await folder.document(self.cache, SKILL_USES_URI),
            await folder.document(self.cache, TOOL_EXPERIENCE_URI),
        )

    def sent(self) -> list[str]:
        return sorted(f"{r.path} {r.uri.rsplit('/', 1)[-1]}".strip() for r in self.recorder.requests)

    async def write(self, uri: str, data: dict[str, object]) -> None:
        await self.ov.write(self.tenant, uri, json.dumps(data), wait=True)


@pytest.fixture
def documents(recorded_client: tuple[OpenVikingClient, RequestRecorder]) -> Documents:
    clock = ManualClock(1_000.0)
    return Documents(*recorded_client, clock, TenantCache(TTL, clock=clock))


@pytest.mark.stack
async def test_documents_are_listed_not_read_while_unchanged_and_read_once_changed(
    documents: Documents,
) -> None:
    await documents.write(SKILL_USES_URI, {"deploy": [{"ok": True}]})
    documents.ahead = DOCUMENT_SETTLE_SECONDS + 5
    assert await documents.call() == ({"deploy": [{"ok": True}]}, {})
    read_both = ["/api/v1/content/read skill-uses.json", "/api/v1/content/read tool-experience.json"]
    assert documents.sent() == sorted(["/api/v1/fs/ls .contextengine", *read_both])

    documents.clock.now += TTL - 1  # within the TTL: nothing sent
    assert await documents.call() == ({"deploy": [{"ok": True}]}, {}) and documents.sent() == []

    documents.clock.now += 2  # past it, unchanged: one listing for both documents
    assert await documents.call() == ({"deploy": [{"ok": True}]}, {})
    assert documents.sent() == ["/api/v1/fs/ls .contextengine"]

    await documents.write(TOOL_EXPERIENCE_URI, {"grep": {"failures": 1}})  # written by another replica
    documents.clock.now += TTL + 1
    assert await documents.call() == ({"deploy": [{"ok": True}]}, {"grep": {"failures": 1}})
    assert documents.sent() == ["/api/v1/content/read tool-experience.json", "/api/v1/fs/ls .contextengine"]


@pytest.mark.stack
async def test_a_document_written_within_the_settle_window_is_read_again(documents: Documents) -> None:
    await documents.write(SKILL_USES_URI, {"deploy": [{"ok": False}]})
    assert (await documents.call())[0] == {"deploy": [{"ok": False}]}  # just written: vouched by nothing

    # A second write in the same second may leave modTime and size as they were: read again.
    await documents.write(SKILL_USES_URI, {"deploy": [{"ok": True}]})
    documents.clock.now += TTL + 1
    assert (await documents.call())[0] == {"deploy": [{"ok": True}]}
    assert "/api/v1/content/read skill-uses.json" in documents.sent()

    documents.ahead = DOCUMENT_SETTLE_SECONDS + 5
    documents.clock.now += TTL + 1
    assert (await documents.call())[0] == {"deploy": [{"ok": True}]}  # settled now: vouched from here
    documents.clock.now += TTL + 1
    assert (await documents.call())[0] == {"deploy": [{"ok": True}]}
    assert documents.sent() == ["/api/v1/fs/ls .contextengine"]
