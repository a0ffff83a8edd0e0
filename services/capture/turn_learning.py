"""What capture learns from a stored turn for skill and tool memory, after the turn's answer.

The turn's reported skill uses are appended to the user's skill-use document and its tool calls
update the user's tool experience (`shared.domain.skills`, `shared.domain.tool_experience`).
It runs in a task of its own once gRPC has sent the answer (`after_answer`), so the capture path
waits for none of it; a failure is logged and costs only that turn's lesson. Same-process caches hear it
(`MemoryChanges`) after every lesson written; elsewhere their TTL bounds the delay.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from contextengine.v1 import common_pb2, envelope_pb2

from shared.domain.documents import DocumentStore, DocumentUpdates
from shared.domain.memory_changes import MemoryChanges
from shared.domain.skills import record_skill_uses
from shared.domain.tool_experience import record_tool_outcomes, tool_outcomes
from shared.openviking.tenant import Tenant
from shared.runtime.answer_first import after_answer

log = logging.getLogger(__name__)

LEARNING_SECONDS = 10.0
"""Longest a turn's lesson may take (its call is answered by then, its deadline no guide)."""


class TurnLearning:
    def __init__(self, store: DocumentStore, changes: MemoryChanges) -> None:
        self._updates = DocumentUpdates(store)
        self._changes = changes
        self._running: set[asyncio.Task[None]] = set()

    def learn(
        self,
        tenant: Tenant,
        messages: Sequence[common_pb2.ConversationMessage],
        used_skills: Sequence[envelope_pb2.UsedSkill],
    ) -> asyncio.Task[None] | None:
        """Start learning from the turn's new `messages` and `used_skills`; None when there is
        nothing to learn."""
        if not used_skills and not tool_outcomes(messages):
            return None
        task = asyncio.ensure_future(self._learn(tenant, list(messages), list(used_skills)))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    async def _learn(
        self,
        tenant: Tenant,
        messages: list[common_pb2.ConversationMessage],
        used_skills: list[envelope_pb2.UsedSkill],
    ) -> None:
        await after_answer()
        deadline = time.monotonic() + LEARNING_SECONDS
        try:
            uses = await record_skill_uses(self._updates, tenant, used_skills, deadline=deadline)
            lesson = await record_tool_outcomes(self._updates, tenant, messages, deadline=deadline)
        except Exception:
            log.warning("skill/tool memory not updated for a turn", exc_info=True)
            return
        if uses or lesson:  # this process's caches drop the user's entries only when something changed
            self._changes.changed(tenant)

    async def drain(self) -> None:
        """Wait for the lessons still being written (shutdown, tests)."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
