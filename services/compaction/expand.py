"""memory_expand (docs/design.md §6.2): from a summary, checkpoint or memory back to the raw turns.

Accepted references:
- a checkpoint id (`cp-...`);
- `<checkpoint id>/earlier`, the summary of every checkpoint of the stream before that one
  (`services.compaction.history`): all their raw turns, oldest first;
- an archive (summary) URI `viking://user/<me>/sessions/<id>/history/archive_NNN[/...]`, or a
  session URI `viking://user/<me>/sessions/<id>` (also `viking://~/...`, `viking://session/<id>`);
- a memory URI under `viking://user/<me>/memories/...` (or `.../peers/<p>/memories/...`), traced
  through the provenance document written when its compaction was finalised;
- a turn-index URI `viking://user/<me>/resources/ce-turns/<session>/<sequence>.md` (a recalled
  raw exchange): that exchange's exact messages, live or archived;
- a recalled exchange's handle `t<digest>.<sequence>` (what a recall result shows,
  `shared.domain.recall_handles`): the same as its turn-index URI;
- a turn id `ct-...` (the pointer in an elided tool output): that message, from the caller's
  stream.

Turns come from the archive's `messages.jsonl`, which OpenViking keeps for completed and failed
archives alike. With a query, turns are ranked by word overlap with it; a memory without a query
is ranked by overlap with the memory's own text. Each turn carries the host message exactly as
it was sent (`ExpandedTurn.message`, the same shape Compact returns) beside its envelope view.
Results are paged: `limit` turns per page (capped to memoryExpandMaxResults), an opaque
`next_page_token` for the rest.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

from contextengine.v1 import common_pb2, compaction_pb2

from services.compaction.handles import session_of
from services.compaction.history import EARLIER_SUFFIX
from services.compaction.transcript import located_session_turns
from shared.domain.archives import archive_messages_uri, read_archive_turns, session_uri
from shared.domain.checkpoints import (
    CheckpointRecord,
    CheckpointStore,
    Status,
    is_checkpoint_id,
    stream_of_checkpoint,
)
from shared.domain.documents import DocumentStore
from shared.domain.envelope import TURN_ID_PREFIX, PersistedTurn, texts_of, turn_envelope
from shared.domain.identity import RequestIdentity, check_free_text_id
from shared.domain.paging import page_offset, page_token
from shared.domain.recall_handles import parse_turn_handle
from shared.domain.stream_state import StreamState, StreamStateStore
from shared.domain.turn_index import parse_turn_uri
from shared.errors import BackendNotFound, InvalidArgument, NotFound, PermissionDenied
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant

FIELD = "summary_or_memory_uri"
MAX_REFERENCE_CHARS = 2048
_SCHEME = "viking://"
_ENGINE_SESSION = re.compile(r"^ce-([0-9a-f]{20})-g\d+$")
_ARCHIVE = re.compile(r"^archive_\d+$")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an the to in on my for of with and or use using that this it is i we you be are was "  # noqa: SIM905
    "do did what which how me your our at as by from".split()
)


def live_messages_uri(tenant: Tenant, session_id: str) -> str:
    return f"{session_uri(tenant, session_id)}/messages.jsonl"


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOPWORDS}


def overlap_score(query_words: set[str], text: str) -> float:
    """Share of the query's words that the text contains (0..1)."""
    if not query_words:
        return 0.0
    return len(query_words & words(text)) / len(query_words)


@dataclass(frozen=True)
class Reference:
    kind: str
    """"checkpoint", "earlier", "session", "archive", "memory", "turn", "turn_handle" or "turn_id"."""
    uri: str
    """Canonical URI (`viking://user/<me>/...`), or the checkpoint or turn id."""
    session_id: str = ""
    archive_uri: str = ""
    first_sequence: int = -1
    """For "turn": the exchange's first message."""


def parse_reference(raw: str, tenant: Tenant) -> Reference:
    """Validate and canonicalise the reference; errors name the request field."""
    value = raw.strip()
    if not value:
        raise InvalidArgument(FIELD, "is required")
    if is_checkpoint_id(value):
        return Reference("checkpoint", value)
    if value.endswith(EARLIER_SUFFIX) and is_checkpoint_id(value.removesuffix(EARLIER_SUFFIX)):
        return Reference("earlier", value.removesuffix(EARLIER_SUFFIX))
    if value.startswith(TURN_ID_PREFIX):
        return Reference("turn_id", value)
    handle = parse_turn_handle(value)
    if handle is not None:
        return Reference("turn_handle", value, first_sequence=handle.first_sequence)
    if not value.startswith(_SCHEME):
        raise InvalidArgument(FIELD, "must be a viking:// URI or a checkpoint id")
    path = value[len(_SCHEME) :].rstrip("/")
    segments = path.split("/")
    if any(not s or s in (".", "..") or re.search(r"\s", s) for s in segments):
        raise InvalidArgument(FIELD, "is not a well-formed viking:// URI")
    if segments[0] == "~":
        segments = ["user", tenant.user_id, *segments[1:]]
    elif segments[0] == "session" and len(segments) >= 2:
        segments = ["user", tenant.user_id, "sessions", *segments[1:]]
    if segments[0] != "user" or len(segments) < 3:
        raise NotFound(f"{FIELD}: {value} is not a session, summary or memory URI in your space")
    if segments[1] != tenant.user_id:
        raise PermissionDenied(f"{FIELD}: {value} belongs to another user")
    return _reference_in_space("viking://" + "/".join(segments), segments[2:], tenant, value)


def _reference_in_space(canonical: str, rest: list[str], tenant: Tenant, value: str) -> Reference:
    """The reference for a path inside the caller's own space (`rest` after `user/<me>/`)."""
    if rest[0] == "sessions" and len(rest) >= 2:
        session_id = rest[1]
        base = session_uri(tenant, session_id)
        if len(rest) >= 4 and rest[2] == "history" and _ARCHIVE.match(rest[3]):
            return Reference("archive", canonical, session_id, f"{base}/history/{rest[3]}")
        return Reference("session", canonical, session_id)
    turn = parse_turn_uri(canonical)
    if turn is not None:
        return Reference("turn", canonical, turn.session_id, first_sequence=turn.first_sequence)
    if "memories" in rest and (rest[0] == "memories" or rest[0] == "peers"):
        return Reference("memory", canonical)
    raise NotFound(f"{FIELD}: {value} is not a session, summary, turn or memory URI")


def exchange_at(turns: list[PersistedTurn], first: int) -> list[PersistedTurn]:
    """The turns from sequence `first` up to (not including) the next user message."""
    out: list[PersistedTurn] = []
    for turn in sorted(turns, key=lambda t: t.sequence):
        if turn.sequence < first:
            continue
        if out and turn.message.role == common_pb2.MESSAGE_ROLE_USER:
            break
        out.append(turn)
    return out


@dataclass
class Source:
    """One archive whose turns are candidates, and where it came from."""

    session_id: str
    archive_uri: str
    agent_id: str
    checkpoint: CheckpointRecord | None = None
    turn_ids: set[str] = field(default_factory=set)
    exchange_from: int = -1
    """When >= 0: only the exchange starting at this sequence (up to the next user message)."""
    exact_turn: str = ""
    """When set: only this turn id."""


class Expander:
    def __init__(self, openviking: OpenVikingClient, max_results: int) -> None:
        self._ov = openviking
        self._max_results = max_results
        documents = DocumentStore(openviking)
        self._states = StreamStateStore(documents)
        self._checkpoints = CheckpointStore(documents)

    def page_size(self, limit: int) -> int:
        """`limit` capped to memoryExpandMaxResults (0 = that maximum)."""
        if limit < 0:
            raise InvalidArgument("limit", "must not be negative")
        return min(limit, self._max_results) if limit else self._max_results

    async def _stream_state(self, tenant: Tenant, stream_id: str, deadline: float) -> StreamState | None:
        return await self._states.load_stream(tenant, stream_id, deadline=deadline)

    async def _checkpoints_of_session(
        self, tenant: Tenant, session_id: str, deadline: float
    ) -> list[CheckpointRecord]:
        match = _ENGINE_SESSION.match(session_id)
        if match is None:
            return []
        state = await self._stream_state(tenant, match[1], deadline)
        if state is None:
            return []
        records = []
        for checkpoint_id in state.checkpoint_ids:
            record = await self._checkpoints.read(tenant, checkpoint_id, deadline=deadline)
            if record is not None and record.session_id == session_id and record.archive_uri:
                records.append(record)
        return records

    def _source(self, record: CheckpointRecord, identity: RequestIdentity) -> Source:
        return Source(record.session_id, record.archive_uri, record.agent_id or identity.agent_id, record)

    async def _checkpoint_sources(
        self, identity: RequestIdentity, ref: Reference, deadline: float
    ) -> list[Source]:
        """The checkpoint's archive, or ("earlier") every committed checkpoint before it."""
        tenant = identity.tenant
        checkpoint_id = ref.uri
        if ref.kind == "checkpoint":
            record = await self._checkpoints.read(tenant, checkpoint_id, deadline=deadline)
            if record is None or not record.archive_uri:
                raise NotFound(f"{FIELD}: checkpoint {checkpoint_id} not found")
            return [self._source(record, identity)]
        stream_id = stream_of_checkpoint(checkpoint_id) or ""
        state = await self._stream_state(tenant, stream_id, deadline)
        if state is None or checkpoint_id not in state.checkpoint_ids:
            raise NotFound(f"{FIELD}: checkpoint {checkpoint_id} not found")
        before = state.checkpoint_ids[: state.checkpoint_ids.index(checkpoint_id)]
        records = await asyncio.gather(
            *(self._checkpoints.read(tenant, c, deadline=deadline) for c in before)
        )
        return [self._source(r, identity) for r in records if r is not None and r.archive_uri]

    async def _turn_sources(self, identity: RequestIdentity, ref: Reference, deadline: float) -> list[Source]:
        """A recalled exchange (turn-index URI) or one message by turn id (in the caller's stream)."""
        if ref.kind == "turn":
            return [Source(ref.session_id, "", identity.agent_id, exchange_from=ref.first_sequence)]
        if ref.kind == "turn_handle":
            handle = parse_turn_handle(ref.uri)
            assert handle is not None  # parse_reference made it from one
            session_id = await session_of(self._ov, identity.tenant, handle, deadline)
            if session_id is None:
                raise NotFound(f"{FIELD}: {ref.uri} names no recalled exchange in your space")
            return [Source(session_id, "", identity.agent_id, exchange_from=ref.first_sequence)]
        state = await self._stream_state(identity.tenant, identity.stream_id, deadline)
        if state is None or not ref.uri.startswith(f"{TURN_ID_PREFIX}{identity.stream_id[:12]}-"):
            raise NotFound(f"{FIELD}: {ref.uri} is not a turn of this session's stream")
        return [Source(s, "", identity.agent_id, exact_turn=ref.uri) for s in state.sessions]

    async def _sources(
        self, identity: RequestIdentity, ref: Reference, deadline: float
    ) -> tuple[list[Source], str]:
        """The archives to expand and the fallback query text (a memory's own content)."""
        tenant = identity.tenant
        if ref.kind in ("checkpoint", "earlier"):
            return await self._checkpoint_sources(identity, ref, deadline), ""
        if ref.kind in ("turn", "turn_handle", "turn_id"):
            return await self._turn_sources(identity, ref, deadline), ""
        if ref.kind in ("session", "archive"):
            records = await self._checkpoints_of_session(tenant, ref.session_id, deadline)
            if ref.kind == "archive":
                records = [r for r in records if r.archive_uri == ref.archive_uri]
                if not records:  # not an engine checkpoint: the archive itself is still readable
                    return [Source(ref.session_id, ref.archive_uri, identity.agent_id)], ""
            if not records:
                return [Source(ref.session_id, "", identity.agent_id)], ""
            return [self._source(r, identity) for r in records], ""
        provenance = await self._checkpoints.read_provenance(tenant, ref.uri, deadline=deadline)
        if provenance is None or not provenance.sources:
            raise NotFound(f"{FIELD}: no compaction is recorded as the source of {ref.uri}")
        sources: list[Source] = []
        for origin in provenance.sources:
            record = await self._checkpoints.read(tenant, origin.checkpoint_id, deadline=deadline)
            source = (
                self._source(record, identity)
                if record is not None
                else Source(origin.session_id, origin.archive_uri, identity.agent_id)
            )
            source.turn_ids = set(origin.turn_ids)
            sources.append(source)
        try:
            memory_text = await self._ov.read(tenant, ref.uri, deadline=deadline)
        except BackendNotFound:
            memory_text = ""
        return sources, memory_text

    async def _turns(
        self, tenant: Tenant, source: Source, deadline: float
    ) -> list[tuple[str, PersistedTurn]]:
        """The source's turns, each with the file it is in."""
        if source.archive_uri:
            uri = archive_messages_uri(source.archive_uri)
            archived = await read_archive_turns(self._ov, tenant, source.archive_uri, deadline=deadline)
            located = [(uri, turn) for turn in archived]
        else:
            located = await located_session_turns(self._ov, tenant, source.session_id, deadline=deadline)
        if source.exchange_from >= 0:
            kept = {t.turn_id for t in exchange_at([t for _, t in located], source.exchange_from)}
            return [(uri, t) for uri, t in located if t.turn_id in kept]
        if source.exact_turn:
            return [(uri, t) for uri, t in located if t.turn_id == source.exact_turn]
        if source.turn_ids:
            return [(uri, t) for uri, t in located if t.turn_id in source.turn_ids] or located
        return located

    async def _archive_checkpoints(
        self, tenant: Tenant, source: Source, located: list[tuple[str, PersistedTurn]], deadline: float
    ) -> dict[str, CheckpointRecord]:
        """The checkpoint of each archive file the turns were read from."""
        if source.checkpoint is not None:
            return {archive_messages_uri(source.checkpoint.archive_uri): source.checkpoint}
        if not any(uri != live_messages_uri(tenant, source.session_id) for uri, _ in located):
            return {}
        records = await self._checkpoints_of_session(tenant, source.session_id, deadline)
        return {archive_messages_uri(r.archive_uri): r for r in records}

    async def _collect(
        self,
        tenant: Tenant,
        sources: list[Source],
        query: set[str],
        response: compaction_pb2.ExpandMemoryResponse,
        deadline: float,
    ) -> list[tuple[float, int, compaction_pb2.ExpandedTurn]]:
        """Candidate turns of every source (scored), filling in the linked and readable URIs and
        the checkpoint: each turn names the file it is in (an archive's once committed)."""
        candidates: list[tuple[float, int, compaction_pb2.ExpandedTurn]] = []
        seen: set[str] = set()
        for source in sources:
            located = await self._turns(tenant, source, deadline)
            checkpoints = await self._archive_checkpoints(tenant, source, located, deadline)
            for uri in (session_uri(tenant, source.session_id), source.archive_uri):
                if uri and uri not in response.linked_uris:
                    response.linked_uris.append(uri)
            for readable, turn in located:
                if turn.turn_id in seen:
                    continue
                seen.add(turn.turn_id)
                record = checkpoints.get(readable)
                if readable not in response.readable_uris:
                    response.readable_uris.append(readable)
                if record is not None:
                    self._note_checkpoint(record, response)
                score = overlap_score(query, "\n".join(texts_of(turn.message)))
                expanded = compaction_pb2.ExpandedTurn(
                    turn=turn_envelope(
                        turn, openviking_session_id=source.session_id, agent_id=source.agent_id
                    ),
                    source_uri=readable,
                    match_score=score,
                    message=turn.message,
                )
                candidates.append((score, turn.sequence, expanded))
        return candidates

    @staticmethod
    def _note_checkpoint(record: CheckpointRecord, response: compaction_pb2.ExpandMemoryResponse) -> None:
        """The first checkpoint met is the response's; an LLM summary's file is readable too."""
        response.checkpoint_id = response.checkpoint_id or record.checkpoint_id
        linked = record.archive_uri
        if linked and linked not in response.linked_uris:
            response.linked_uris.append(linked)
        overview = f"{record.archive_uri}/.overview.md"
        completed = record.status == Status.CHECKPOINT_STATUS_COMPLETED
        if completed and record.summary and overview not in response.readable_uris:
            response.readable_uris.append(overview)

    async def expand(
        self, identity: RequestIdentity, request: compaction_pb2.ExpandMemoryRequest, deadline: float
    ) -> compaction_pb2.ExpandMemoryResponse:
        limit = self.page_size(request.limit)
        offset = page_offset(request.page_token)
        check_free_text_id(request.summary_or_memory_uri, FIELD, max_chars=MAX_REFERENCE_CHARS)
        ref = parse_reference(request.summary_or_memory_uri, identity.tenant)
        sources, memory_text = await self._sources(identity, ref, deadline)
        query = words(request.query or memory_text)
        response = compaction_pb2.ExpandMemoryResponse()
        candidates = await self._collect(identity.tenant, sources, query, response, deadline)
        if not candidates:
            raise NotFound(f"{FIELD}: {request.summary_or_memory_uri} has no recorded turns")
        if query:
            candidates.sort(key=lambda c: (-c[0], c[1]))
        else:
            candidates.sort(key=lambda c: c[1])
        response.turns.extend(c[2] for c in candidates[offset : offset + limit])
        if offset + limit < len(candidates):
            response.next_page_token = page_token(offset + limit)
        if ref.kind == "memory":
            response.readable_uris.append(ref.uri)
        return response
