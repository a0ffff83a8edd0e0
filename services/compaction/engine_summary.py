"""The engine's own summary of a checkpoint's archived turns, stored with the checkpoint.

Written by the compaction worker as soon as the commit is recorded (before OpenViking's phase 2
ends, LLM or not), in the checkpoint document itself, so every assembly replica reads it with
the checkpoint and `memory_expand(checkpoint_id)` returns the very turns it summarises. Assemble
shows it while OpenViking has no real summary of the archive (always, without an LLM).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from contextengine.v1 import common_pb2

from services.compaction.extractive import ExtractiveSummary, Sentence, split_sentences, summarise
from shared.domain.archives import read_archive_turns
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore, EngineSummary, SummarySentence
from shared.domain.envelope import PersistedTurn
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.tokens import TokenCounter

_ROLES = {common_pb2.MESSAGE_ROLE_USER: "U", common_pb2.MESSAGE_ROLE_ASSISTANT: "A"}


def said_on(message: common_pb2.ConversationMessage) -> str:
    if not message.HasField("timestamp"):
        return ""
    return message.timestamp.ToDatetime(tzinfo=UTC).date().isoformat()


def turn_sentences(turns: Sequence[PersistedTurn], count: TokenCounter) -> list[Sentence]:
    """The sentences of the user's and the assistant's texts, by exchange (a user message and
    what follows it, known by the stream sequence of its first message, so summaries of several
    checkpoints merge). Tool calls and results are left out: `memory_expand` returns them whole."""
    sentences: list[Sentence] = []
    exchange = -1
    for turn in sorted(turns, key=lambda t: t.sequence):
        message = turn.message
        if message.role == common_pb2.MESSAGE_ROLE_USER or exchange < 0:
            exchange = turn.sequence
        role = _ROLES.get(message.role)
        if role is None:
            continue
        text = "\n".join(b.text.text for b in message.content if b.HasField("text"))
        day = said_on(message)
        for index, piece in enumerate(split_sentences(text, count.count)):
            sentences.append(Sentence((turn.sequence, index), (exchange,), day, role, piece))
    return sentences


def stored(
    summary: ExtractiveSummary, encoding: str, covers_turns: int, covers_checkpoints: int = 1
) -> EngineSummary:
    return EngineSummary(
        text=summary.text,
        tokens=summary.tokens,
        encoding=encoding,
        sentences=[
            SummarySentence(
                position=list(s.position),
                exchange=list(s.exchange),
                said_on=s.said_on,
                role=s.role,
                text=s.text,
            )
            for s in summary.picked
        ],
        source_terms={kind: sorted(terms) for kind, terms in summary.source_terms.kinds.items()},
        kept_terms=dict(summary.coverage.kept),
        covers_turns=covers_turns,
        covers_checkpoints=covers_checkpoints,
    )


def engine_summary_of(
    turns: Sequence[PersistedTurn], *, max_tokens: int, count: TokenCounter
) -> EngineSummary:
    """The engine summary of archived turns, within `max_tokens`."""
    summary = summarise(turn_sentences(turns, count), max_tokens=max_tokens, count=count.count)
    return stored(summary, count.encoding_name, len(turns))


class EngineSummariser:
    """Writes the engine summary of a committed checkpoint, once (idempotent, any replica): with
    the commit's record as a rule (`summary_of`), on its own when the commit was recorded
    without it (`ensure`)."""

    def __init__(
        self, openviking: OpenVikingClient, store: CheckpointStore, *, max_tokens: int, encoding: str
    ) -> None:
        self._ov = openviking
        self._store = store
        self._max_tokens = max_tokens
        self._count = TokenCounter.for_model("", encoding)

    def summary_of(self, turns: Sequence[PersistedTurn]) -> EngineSummary:
        """The engine summary of archived `turns` (written with the commit's record when the
        worker attaches it: `shared.domain.finalisation.attach_commit`)."""
        return engine_summary_of(turns, max_tokens=self._max_tokens, count=self._count)

    async def ensure(self, tenant: Tenant, record: CheckpointRecord) -> CheckpointRecord:
        """The checkpoint with its engine summary (written now when it has none yet)."""
        if record.engine_summary is not None or not record.archive_uri:
            return record
        summary = self.summary_of(await read_archive_turns(self._ov, tenant, record.archive_uri))

        def attach(current: CheckpointRecord) -> CheckpointRecord | None:
            if current.engine_summary is not None:
                return None
            current.engine_summary = summary
            return current

        return await self._store.update(tenant, record.checkpoint_id, attach) or record
