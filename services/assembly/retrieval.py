"""Assemble's retrieval stage: the profile, recall and the compact summaries, fetched concurrently.

`Retrieval.start` sends all three off at once (recall first: its `find` is the longest call), so
the host transcript can be taken up while they are in flight; `collect` then waits for them, each
bounded by the one deadline. A failed or slow part is left out and reported (`degraded_reasons`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contextengine.v1 import packet_pb2

from services.assembly.exchange_index import ExchangeIndex
from services.assembly.pool_depth import PoolDepths
from services.assembly.ports import AssemblyBackend
from services.assembly.profile import PROFILE_MAX_TOKENS, ProfileCache, StableProfile, load_stable_profile
from services.assembly.recall import RecallConfig, RecallOutcome, bounded, describe_failure, recall_memories
from services.assembly.recall_query import RecallQuery
from services.assembly.send_order import after_recall_sends
from services.assembly.skill_pool import SkillPool
from services.assembly.summaries import SummarySource
from shared.config import Settings
from shared.domain.identity import RequestIdentity
from shared.tokens import TokenCounter

T = TypeVar("T")


@dataclass
class Retrieved:
    profile: StableProfile = field(default_factory=StableProfile)
    recall: RecallOutcome | None = None
    summaries: list[packet_pb2.CompactSummary] = field(default_factory=list)
    degraded_reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Retrieval:
    """The three parts in flight (profile and recall are None when auto recall is off or has
    no query)."""

    query: RecallQuery
    deadline: float
    recall: asyncio.Future[RecallOutcome] | None
    summaries: asyncio.Future[list[packet_pb2.CompactSummary]]
    profile: asyncio.Future[StableProfile] | None
    skill_pool: SkillPool | None = None
    """The skill hits recall's `find` brings along (`skill_pool`), when skills were asked for
    and recall runs."""
    excluded: set[str] = field(default_factory=set)
    """What recall leaves out: the memories the profile shows (known once it is in)."""

    @classmethod
    def start(
        cls,
        client: AssemblyBackend,
        summary_source: SummarySource,
        settings: Settings,
        identity: RequestIdentity,
        query: RecallQuery,
        *,
        counter: TokenCounter,
        budget: int,
        deadline: float,
        profiles: ProfileCache,
        exchanges: ExchangeIndex | None = None,
        depths: PoolDepths | None = None,
        with_skills: bool = False,
        transcript_shows: bool = True,
    ) -> Retrieval:
        """`transcript_shows`: the host's transcript holds messages before the prompt (recall
        then offers packing more than fits, `RecallConfig.from_settings`)."""
        recall_on = settings.auto_recall
        skill_pool: SkillPool | None = (
            asyncio.get_running_loop().create_future() if with_skills and recall_on and query.query else None
        )
        max_tokens = (settings.recall_token_budget or PROFILE_MAX_TOKENS * 2) // 2
        excluded: set[str] = set()
        recall = (
            _started(
                recall_memories(
                    client,
                    tenant=identity.tenant,
                    agent_id=identity.agent_id,
                    query=query.query,
                    config=RecallConfig.from_settings(
                        settings, budget=budget, transcript_shows=transcript_shows
                    ),
                    counter=counter,
                    deadline=deadline,
                    exchanges=exchanges,
                    skill_pool=skill_pool,
                    depths=depths,
                    exclude_uris=excluded,
                ),
                deadline,
            )
            if recall_on and query.query
            else None
        )
        summaries = _started(
            after_recall_sends(
                summary_source.latest_summaries(identity, deadline, opening=not transcript_shows)
            ),
            deadline,
        )
        load_profile = functools.partial(
            load_stable_profile,
            client,
            identity.tenant,
            identity.agent_id,
            counter,
            max_tokens=max_tokens,
            max_item_chars=settings.recall_max_content_chars,
            deadline=deadline,
        )
        profile = (
            _started(
                after_recall_sends(
                    profiles.get(
                        identity.tenant,
                        (identity.agent_id, max_tokens, settings.recall_max_content_chars),
                        load_profile,
                        revalidate=lambda earlier: load_profile(earlier=earlier),
                    )
                ),
                deadline,
            )
            if recall_on
            else None
        )
        return cls(query, deadline, recall, summaries, profile, skill_pool, excluded)

    def abandon(self) -> None:
        """The request turned out invalid: what is in flight finishes (bounded by the deadline)
        unread. Not cancelled: a part cancelled before its first step would leave the calls it
        already built never awaited."""
        for part in (self.recall, self.summaries, self.profile):
            if part is not None:
                part.add_done_callback(_ignore)

    async def collect(self) -> Retrieved:
        retrieved = Retrieved()
        if self.profile is not None:
            try:
                retrieved.profile = await self.profile
            except Exception as exc:
                retrieved.degraded_reasons.append(describe_failure("profile", exc))
            retrieved.degraded_reasons.extend(retrieved.profile.degraded_reasons)
        if self.recall is not None:
            try:
                outcome = await self.recall
            except Exception as exc:
                outcome = RecallOutcome(self.query.query, degraded_reasons=[describe_failure("recall", exc)])
            # What the profile shows is not recalled again.
            self.excluded.update(retrieved.profile.uris)  # read as the items are built
            retrieved.degraded_reasons.extend(outcome.degraded_reasons)
            retrieved.recall = outcome
        try:
            retrieved.summaries = await self.summaries
        except Exception as exc:
            retrieved.degraded_reasons.append(describe_failure("summaries", exc))
        return retrieved


def _started(call: Awaitable[T], deadline: float) -> asyncio.Future[T]:
    """`call` as a task now, given up at `deadline` (TimeoutError); its first step (up to its
    first request going out) runs at the caller's next `await`."""
    return asyncio.ensure_future(bounded(call, deadline))


def _ignore(part: asyncio.Future[Any]) -> None:
    if not part.cancelled():
        part.exception()  # seen: a failure of an abandoned part is no error
