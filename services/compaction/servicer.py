"""The gRPC servicer: validates requests, calls the compaction logic, builds responses."""

from __future__ import annotations

from typing import Any

from contextengine.v1 import checkpoint_pb2, compaction_pb2, compaction_pb2_grpc
from grpc import aio

from services.compaction.compact import Compactor
from services.compaction.expand import Expander
from services.compaction.listing import CheckpointListing
from services.compaction.worker import CompactionWorker
from shared.config import Settings
from shared.domain.checkpoints import CheckpointRecord, CheckpointStore, is_checkpoint_id, to_proto
from shared.domain.documents import DocumentStore
from shared.domain.finalisation import finalise, stream_identity
from shared.domain.identity import request_identity
from shared.domain.paging import page_offset, page_token
from shared.errors import Aborted, BackendError, InvalidArgument, NotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.runtime.deadlines import call_deadline
from shared.telemetry import attributes as attr
from shared.telemetry.tracing import current_traceparent

DEFAULT_DEADLINE_SECONDS = 300.0
"""Budget of a call that arrives without a gRPC deadline."""
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100

Context = aio.ServicerContext[Any, Any]


def _deadline(context: Context) -> float:
    deadline = call_deadline(context, DEFAULT_DEADLINE_SECONDS)
    assert deadline is not None
    return deadline


def _traceparent(context: Context) -> str:
    """The turn's trace context: this call's span, else the caller's `traceparent` metadata."""
    current = current_traceparent()
    if current:
        return current
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "traceparent":
            return value if isinstance(value, str) else value.decode()
    return ""


class CompactionServicer(compaction_pb2_grpc.CompactionServiceServicer):
    def __init__(
        self,
        settings: Settings,
        openviking: OpenVikingClient,
        compactor: Compactor,
        expander: Expander,
        worker: CompactionWorker,
    ) -> None:
        self._settings = settings
        self._worker = worker
        self._ov = openviking
        self._compactor = compactor
        self._expander = expander
        documents = DocumentStore(openviking)
        self._checkpoints = CheckpointStore(documents)
        self._listing = CheckpointListing(openviking)

    async def Compact(  # noqa: N802 - gRPC method name
        self, request: compaction_pb2.CompactRequest, context: Context
    ) -> compaction_pb2.CompactResponse:
        identity = request_identity(request.identity, self._settings, session_required=True)
        attr.set_identity(
            account_id=identity.tenant.account_id, session_id=identity.session_id, agent_id=identity.agent_id
        )
        if request.token_budget < 0:
            raise InvalidArgument("token_budget", "must not be negative")
        if request.current_token_count < 0:
            raise InvalidArgument("current_token_count", "must not be negative")
        if request.trigger not in checkpoint_pb2.CompactionTrigger.values():
            raise InvalidArgument("trigger", "is not a CompactionTrigger value")
        response = await self._compactor.compact(
            identity, request, traceparent=_traceparent(context), deadline=_deadline(context)
        )
        if response.checkpoint.checkpoint_id:
            status = checkpoint_pb2.CheckpointStatus.Name(response.checkpoint.status)
            attr.set_checkpoint(
                response.checkpoint.checkpoint_id, outcome=status.removeprefix("CHECKPOINT_STATUS_").lower()
            )
        return response

    async def ExpandMemory(  # noqa: N802 - gRPC method name
        self, request: compaction_pb2.ExpandMemoryRequest, context: Context
    ) -> compaction_pb2.ExpandMemoryResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        return await self._expander.expand(identity, request, _deadline(context))

    async def _observed(self, tenant: Tenant, record: CheckpointRecord, deadline: float) -> CheckpointRecord:
        """An observer finalises a pending checkpoint whose task ended and makes sure the
        hand-off has a live owner (e.g. its replica died)."""
        if record.is_terminal:
            return record
        try:
            record = await finalise(self._ov, tenant, record, store=self._checkpoints, deadline=deadline)
            if not record.is_terminal:
                await self._worker.own_stream(stream_identity(tenant, record), deadline=deadline)
        except (BackendError, Aborted):
            pass
        return record

    async def _read_or_own(
        self, tenant: Tenant, checkpoint_id: str, deadline: float
    ) -> CheckpointRecord | None:
        """The stored checkpoint; a hand-off whose document is not written yet is owned first."""
        record = await self._checkpoints.read(tenant, checkpoint_id, deadline=deadline)
        if record is None:
            record = await self._worker.own_by_id(tenant, checkpoint_id, deadline=deadline)
        return record

    async def GetCheckpoint(  # noqa: N802 - gRPC method name
        self, request: compaction_pb2.GetCheckpointRequest, context: Context
    ) -> compaction_pb2.GetCheckpointResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        if not request.checkpoint_id:
            raise InvalidArgument("checkpoint_id", "is required")
        if not is_checkpoint_id(request.checkpoint_id):
            raise InvalidArgument("checkpoint_id", "is not a checkpoint id (cp-...)")
        deadline = _deadline(context)
        record = await self._read_or_own(identity.tenant, request.checkpoint_id, deadline)
        if record is None:
            raise NotFound(f"checkpoint_id: checkpoint {request.checkpoint_id} not found")
        record = await self._observed(identity.tenant, record, deadline)
        return compaction_pb2.GetCheckpointResponse(checkpoint=to_proto(record))

    async def ListCheckpoints(  # noqa: N802 - gRPC method name
        self, request: compaction_pb2.ListCheckpointsRequest, context: Context
    ) -> compaction_pb2.ListCheckpointsResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        page_size = request.page_size or DEFAULT_PAGE_SIZE
        if page_size < 0 or page_size > MAX_PAGE_SIZE:
            raise InvalidArgument("page_size", f"must be between 0 and {MAX_PAGE_SIZE}")
        offset = page_offset(request.page_token)
        deadline = _deadline(context)
        ids = await self._listing.ids(identity, agent_id=request.identity.agent_id or None, deadline=deadline)
        response = compaction_pb2.ListCheckpointsResponse()
        for checkpoint_id in ids[offset : offset + page_size]:
            record = await self._read_or_own(identity.tenant, checkpoint_id, deadline)
            if record is not None:
                record = await self._observed(identity.tenant, record, deadline)
                response.checkpoints.append(to_proto(record))
        if offset + page_size < len(ids):
            response.next_page_token = page_token(offset + page_size)
        return response
