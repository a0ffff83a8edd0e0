"""`AssemblyService`: validate the request, call the logic, build the response."""

from __future__ import annotations

import time
from typing import Any

from contextengine.v1 import assembly_pb2, assembly_pb2_grpc, common_pb2, packet_pb2
from grpc import aio

from services.assembly.assemble import (
    AssembleCaches,
    assemble_context,
    recall_fallback_block,
    recall_for_tool,
    retrieval_deadline,
)
from services.assembly.envelopes import ENVELOPES, EnvelopeCache
from services.assembly.exchange_index import ExchangeIndex
from services.assembly.ports import AssemblyBackend
from services.assembly.profile import profile_cache
from services.assembly.request_wire import ASSEMBLE_WIRE, AssembleWire
from services.assembly.summaries import SummarySource
from services.assembly.token_counts import TokenCountCache
from shared.config import Settings
from shared.domain.host_messages import HostMessageCache
from shared.domain.identity import request_identity
from shared.domain.memory_changes import MemoryChanges
from shared.domain.messages import MAX_TEXT_CHARS
from shared.errors import FailedPrecondition, InvalidArgument
from shared.settings_overrides import CallSettings
from shared.telemetry import attributes as attr
from shared.telemetry.metrics import record_assembled_tokens, record_recall_hits

MAX_RECALL_LIMIT = 100

Context = aio.ServicerContext[Any, Any]


class AssemblyService(assembly_pb2_grpc.AssemblyServiceServicer):
    def __init__(
        self,
        settings: Settings,
        backend: AssemblyBackend,
        summaries: SummarySource,
        memory_changes: MemoryChanges | None = None,
        exchanges: ExchangeIndex | None = None,
    ) -> None:
        """`exchanges`: the replica's exchange index, when the summary source also reads its
        listings (else one of its own)."""
        self._settings = settings
        self._call_settings = CallSettings(settings)
        self._backend = backend
        self._summaries = summaries
        exchanges = exchanges or ExchangeIndex(backend)
        self._caches = AssembleCaches(
            host_messages=HostMessageCache(),
            token_counts=TokenCountCache(),
            profiles=profile_cache(),
            envelopes=EnvelopeCache(ENVELOPES),
            exchanges=exchanges,
        )
        if memory_changes is not None:
            memory_changes.subscribe(self._caches.profiles.invalidate)
            memory_changes.subscribe(self._caches.sources.invalidate)
            memory_changes.subscribe(exchanges.forget_listing)
            memory_changes.subscribe(self._caches.depths.forget)

    async def aclose(self) -> None:
        """Stop the exchange index's background syncs and the sources' background reads (at
        shutdown, before the client closes)."""
        if self._caches.exchanges is not None:
            await self._caches.exchanges.aclose()
        await self._caches.sources.aclose()

    def _deadline(self, context: Context) -> float:
        return retrieval_deadline(
            time.monotonic(), context.time_remaining(), self._settings.recall_timeout_ms
        )

    async def Assemble(  # noqa: N802 - gRPC method name
        self, request: assembly_pb2.AssembleRequest, context: Context
    ) -> assembly_pb2.AssembleResponse:
        """An in-process caller's request; the server hands `assemble_wire` the request as it
        arrives (`services.assembly.request_wire`)."""
        return await self.assemble_wire(ASSEMBLE_WIRE.of(request), context)

    async def assemble_wire(self, request: AssembleWire, context: Context) -> assembly_pb2.AssembleResponse:
        identity = request_identity(request.identity, self._settings, session_required=True)
        attr.set_identity(
            account_id=identity.tenant.account_id, session_id=identity.session_id, agent_id=identity.agent_id
        )
        if request.token_budget < 0:
            raise InvalidArgument("token_budget", "must be >= 0 (0 means the configured default)")
        if len(request.prompt) > MAX_TEXT_CHARS:
            raise InvalidArgument("prompt", f"is longer than {MAX_TEXT_CHARS} characters")
        result = await assemble_context(
            self._backend,
            self._summaries,
            self._call_settings.for_call(request.overrides),
            identity,
            request.messages,
            caches=self._caches,
            token_budget=request.token_budget,
            model=request.model,
            prompt=request.prompt,
            deadline=self._deadline(context),
        )
        tokens = result.packet.tokens
        attr.set_tokens(
            budget=tokens.budget, used=tokens.used, cut=tokens.recalled_memories_cut + tokens.summaries_cut
        )
        attr.set_recall(recalled=len(result.packet.recalled_memories), degraded=result.packet.degraded)
        intent = result.packet.recall_intent
        attr.set_recall_intent(
            "recall" if intent.recall else intent.reason,
            [packet_pb2.RecallSource.Name(s).removeprefix("RECALL_SOURCE_").lower() for s in intent.sources],
        )
        record_assembled_tokens(result.estimated_tokens)
        record_recall_hits(len(result.packet.recalled_memories), degraded=result.packet.degraded)
        return assembly_pb2.AssembleResponse(
            messages=result.messages,
            estimated_tokens=result.estimated_tokens,
            system_prompt_addition=result.system_prompt_addition,
            packet=result.packet,
        )

    async def RecallMemories(  # noqa: N802 - gRPC method name
        self, request: assembly_pb2.RecallMemoriesRequest, context: Context
    ) -> assembly_pb2.RecallMemoriesResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        if not request.query.strip():
            raise InvalidArgument("query", "is required")
        if len(request.query) > MAX_TEXT_CHARS:
            raise InvalidArgument("query", f"is longer than {MAX_TEXT_CHARS} characters")
        if not 0 <= request.limit <= MAX_RECALL_LIMIT:
            raise InvalidArgument("limit", f"must be between 0 and {MAX_RECALL_LIMIT} (0 means recallLimit)")
        result = await recall_for_tool(
            self._backend,
            self._call_settings.for_call(request.overrides),
            identity,
            request.query,
            limit=request.limit,
            deadline=self._deadline(context),
            exchanges=self._caches.exchanges,
        )
        return assembly_pb2.RecallMemoriesResponse(
            memories=result.memories,
            tool_result=common_pb2.JsonValue(json=result.tool_result_json),
            degraded=result.degraded,
        )

    async def RecallFallback(  # noqa: N802 - gRPC method name
        self, request: assembly_pb2.RecallFallbackRequest, context: Context
    ) -> assembly_pb2.RecallFallbackResponse:
        if not self._settings.fallback_recall_enabled:
            raise FailedPrecondition("fallback recall is disabled (fallbackRecallEnabled=false)")
        identity = request_identity(request.identity, self._settings, session_required=False)
        if len(request.prompt) > MAX_TEXT_CHARS:
            raise InvalidArgument("prompt", f"is longer than {MAX_TEXT_CHARS} characters")
        result = await recall_fallback_block(
            self._backend,
            self._call_settings.for_call(request.overrides),
            identity,
            request.prompt,
            deadline=self._deadline(context),
            exchanges=self._caches.exchanges,
        )
        return assembly_pb2.RecallFallbackResponse(
            prepend_context=result.prepend_context,
            memories=result.memories,
            estimated_tokens=result.estimated_tokens,
            degraded=result.degraded,
        )
