"""Summaries of summaries: a long session's whole past inside a budget (issue 31 item 5).

Each checkpoint K carries `earlier`, the summary of every checkpoint of its stream before it:
the extractive selection (`services.compaction.extractive`) run again, within the same cap, over
the sentences of K-1's `earlier` and K-1's own engine summary. So each level re-picks from the
level below and the chain stays one summary however many compactions there were; what it keeps
of the raw turns is measured against the union of their terms (`source_terms` of every level),
and stored with it. Assemble shows the `earlier` of the oldest checkpoint it shows individually,
so the stream's past is covered once, without a gap; `memory_expand("<K>/earlier")` returns the
raw turns of every checkpoint before K.

A checkpoint whose predecessor has no summaries yet (its worker is still at it, or it predates
them) makes them here: both writes are idempotent compare-and-swaps any replica may do.
"""

from __future__ import annotations

from services.compaction.engine_summary import EngineSummariser, stored
from services.compaction.extractive import Sentence, summarise
from services.compaction.key_terms import KeyTerms
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore, EngineSummary
from shared.domain.identity import RequestIdentity
from shared.domain.stream_state import StreamStateStore
from shared.sized_cache import SizedCache
from shared.tokens import TokenCounter

REMEMBERED_FIRSTS = 4_096
"""Checkpoints known to be their stream's first (no `earlier`): a worker polling one reads the
stream state once, not at every poll."""
EARLIER_SUFFIX = "/earlier"
"""`<checkpoint id>/earlier`: the reference of a checkpoint's `earlier` summary."""


def earlier_reference(checkpoint_id: str) -> str:
    return f"{checkpoint_id}{EARLIER_SUFFIX}"


def _sentences(summary: EngineSummary) -> list[Sentence]:
    return [
        Sentence(tuple(s.position), tuple(s.exchange), s.said_on, s.role, s.text) for s in summary.sentences
    ]


def _terms(summary: EngineSummary) -> KeyTerms:
    terms = summary.terms()
    return KeyTerms(
        terms.get("names", frozenset()), terms.get("numbers", frozenset()), terms.get("dates", frozenset())
    )


def summary_of_summaries(
    parts: list[EngineSummary], *, max_tokens: int, count: TokenCounter
) -> EngineSummary | None:
    """One summary of the parts (oldest first), judged against all their source turns' terms."""
    if not parts:
        return None
    source = KeyTerms()
    for part in parts:
        source |= _terms(part)
    sentences = [s for part in parts for s in _sentences(part)]
    summary = summarise(sentences, max_tokens=max_tokens, count=count.count, source_terms=source)
    return stored(
        summary,
        count.encoding_name,
        covers_turns=sum(p.covers_turns for p in parts),
        covers_checkpoints=sum(p.covers_checkpoints for p in parts),
    )


class HistorySummariser:
    """Writes a checkpoint's `earlier` summary from its predecessor's summaries."""

    def __init__(
        self,
        store: CheckpointStore,
        states: StreamStateStore,
        summariser: EngineSummariser,
        *,
        max_tokens: int,
        encoding: str,
    ) -> None:
        self._store = store
        self._states = states
        self._summariser = summariser
        self._max_tokens = max_tokens
        self._count = TokenCounter.for_model("", encoding)
        self._firsts: SizedCache[str, bool] = SizedCache(REMEMBERED_FIRSTS)

    async def ensure(self, identity: RequestIdentity, record: CheckpointRecord) -> CheckpointRecord:
        """The checkpoint with its `earlier` summary (none for a stream's first checkpoint)."""
        if record.earlier is not None or self._firsts.get(record.checkpoint_id):
            return record
        state = await self._states.load(identity)
        if state is None or record.checkpoint_id not in state.checkpoint_ids:
            return record
        before = state.checkpoint_ids[: state.checkpoint_ids.index(record.checkpoint_id)]
        if not before:  # checkpoint ids are only ever appended: it stays its stream's first
            self._firsts.put(record.checkpoint_id, True)
        # Walk back to the newest predecessor whose own `earlier` is known, then forward.
        chain: list[CheckpointRecord] = []
        for checkpoint_id in reversed(before):
            previous = await self._store.read(identity.tenant, checkpoint_id)
            if previous is None:
                continue
            chain.insert(0, previous)
            if previous.earlier is not None:
                break
        earlier: EngineSummary | None = chain[0].earlier if chain else None
        for previous in chain:
            if previous.earlier is None and earlier is not None:
                await self._attach(identity, previous.checkpoint_id, earlier)
            own = (await self._summariser.ensure(identity.tenant, previous)).engine_summary
            parts = [p for p in (earlier, own) if p is not None]
            earlier = summary_of_summaries(parts, max_tokens=self._max_tokens, count=self._count)
        if earlier is None:
            return record
        return await self._attach(identity, record.checkpoint_id, earlier) or record

    async def _attach(
        self, identity: RequestIdentity, checkpoint_id: str, earlier: EngineSummary
    ) -> CheckpointRecord | None:
        def attach(current: CheckpointRecord) -> CheckpointRecord | None:
            if current.earlier is not None:
                return None
            current.earlier = earlier
            return current

        return await self._store.update(identity.tenant, checkpoint_id, attach)
