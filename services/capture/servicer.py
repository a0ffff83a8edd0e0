"""The gRPC face of capture: validate, call the logic, build the response."""

from __future__ import annotations

from contextengine.v1 import capture_pb2, capture_pb2_grpc, checkpoint_pb2
from grpc import aio

from services.capture import memories
from services.capture.request_wire import AFTER_TURN_WIRE, AfterTurnWire
from services.capture.skill_registry import register_skills
from services.capture.turn_learning import TurnLearning
from services.capture.turns import FencedTurn, TurnCapture, TurnOutcome
from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.host_messages import (
    HOST_MESSAGE_BYTES,
    STREAM_TRANSCRIPT_BYTES,
    HostMessageCache,
    host_transcript,
)
from shared.domain.identity import request_identity
from shared.domain.memory_changes import MemoryChanges
from shared.domain.messages import (
    MAX_ID_CHARS,
    VALIDATED_MESSAGES,
    ValidatedMessages,
    validate_json_object,
    validate_messages,
)
from shared.domain.skills import validate_used_skills, validated_skills
from shared.errors import InvalidArgument
from shared.openviking.client import OpenVikingClient
from shared.runtime.deadlines import call_deadline
from shared.settings_overrides import CallSettings
from shared.telemetry import attributes as attr
from shared.telemetry.metrics import record_trigger

SKIPPED_CAPTURE_OFF = "auto_capture_disabled"
SKIPPED_HEARTBEAT = "heartbeat"
REGISTER_SECONDS = 300.0
"""RegisterSkills' bound when the caller sets no deadline (200 skills embed in about a minute)."""


def _record_turn_attributes(outcome: TurnOutcome, token_budget: int) -> None:
    attr.set_turn(
        sequence=outcome.last_sequence,
        persisted=outcome.persisted_count,
        duplicates=outcome.duplicate_count,
        openviking_session_id=outcome.session_id,
    )
    attr.set_tokens(budget=token_budget, used=outcome.estimated_tokens)
    if outcome.trigger:
        trigger = checkpoint_pb2.CompactionTrigger.Name(outcome.trigger)
        attr.set_trigger(trigger)
        attr.set_checkpoint(outcome.checkpoint_id, outcome="pending")
        record_trigger(trigger)


class CaptureServicer(capture_pb2_grpc.CaptureServiceServicer):
    def __init__(
        self,
        settings: Settings,
        openviking: OpenVikingClient,
        turns: TurnCapture,
        memory_changes: MemoryChanges | None = None,
    ) -> None:
        self._settings = settings
        self._call_settings = CallSettings(settings)
        self._ov = openviking
        self._turns = turns
        self._memory_changes = memory_changes or MemoryChanges()
        self._documents = DocumentStore(openviking)
        self.learning = TurnLearning(self._documents, self._memory_changes)
        """Skill uses and tool experience from stored turns, written after their answers."""
        self._validated = ValidatedMessages(VALIDATED_MESSAGES)
        """CommitTurn's and Ingest's messages: a retried message is validated once."""
        self._host_messages = HostMessageCache(HOST_MESSAGE_BYTES // 2, STREAM_TRANSCRIPT_BYTES // 2)
        """AfterTurn's: a host resends its whole transcript, only new messages are decoded (half
        of assembly's bounds: capture's container has 512 MiB)."""

    async def AfterTurn(  # noqa: N802 - gRPC method name
        self, request: capture_pb2.AfterTurnRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.AfterTurnResponse:
        """An in-process caller's request; the server hands `after_turn_wire` the request as it
        arrives (`services.capture.request_wire`)."""
        return await self.after_turn_wire(AFTER_TURN_WIRE.of(request), context)

    async def after_turn_wire(
        self, request: AfterTurnWire, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.AfterTurnResponse:
        if not self._settings.auto_capture:
            return capture_pb2.AfterTurnResponse(last_sequence=-1, skipped_reason=SKIPPED_CAPTURE_OFF)
        if request.is_heartbeat:
            return capture_pb2.AfterTurnResponse(last_sequence=-1, skipped_reason=SKIPPED_HEARTBEAT)
        identity = request_identity(request.identity, self._settings, session_required=True)
        attr.set_identity(
            account_id=identity.tenant.account_id, session_id=identity.session_id, agent_id=identity.agent_id
        )
        transcript = host_transcript(request.messages, self._host_messages, identity.buffer_key)
        if not 0 <= request.pre_prompt_message_count <= len(request.messages):
            raise InvalidArgument(
                "pre_prompt_message_count", f"must be between 0 and {len(request.messages)}"
            )
        if request.token_budget < 0:
            raise InvalidArgument("token_budget", "must not be negative")
        validate_used_skills(request.used_skills)
        outcome = await self._turns.after_turn(
            identity,
            transcript.messages,
            request.pre_prompt_message_count,
            token_budget=request.token_budget,
            model=request.model,
            deadline=call_deadline(context),
            shapes=transcript.shapes,
        )
        _record_turn_attributes(outcome, request.token_budget or self._settings.default_token_budget)
        if outcome.persisted_count:
            self.learning.learn(
                identity.tenant,
                transcript.messages[request.pre_prompt_message_count :],
                request.used_skills,
            )
        return capture_pb2.AfterTurnResponse(
            persisted_count=outcome.persisted_count,
            duplicate_count=outcome.duplicate_count,
            injected_skipped_count=outcome.injected_skipped_count,
            last_sequence=outcome.last_sequence,
            openviking_session_id=outcome.session_id,
            trigger_fired=outcome.trigger,
            compaction_checkpoint_id=outcome.checkpoint_id,
            estimated_tokens=outcome.estimated_tokens,
            capture_worthy=outcome.capture_worthy,
        )

    async def CommitTurn(  # noqa: N802
        self, request: capture_pb2.CommitTurnRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.CommitTurnResponse:
        committed = capture_pb2.COMMIT_TURN_STATUS_COMMITTED
        if not self._call_settings.for_call(request.overrides).auto_capture:
            return capture_pb2.CommitTurnResponse(
                status=committed, first_sequence=-1, last_sequence=-1, skipped_reason=SKIPPED_CAPTURE_OFF
            )
        if request.is_heartbeat:
            return capture_pb2.CommitTurnResponse(
                status=committed, first_sequence=-1, last_sequence=-1, skipped_reason=SKIPPED_HEARTBEAT
            )
        identity = request_identity(request.identity, self._settings, session_required=True)
        attr.set_identity(
            account_id=identity.tenant.account_id, session_id=identity.session_id, agent_id=identity.agent_id
        )
        if not request.advancement_key.strip():
            raise InvalidArgument("advancement_key", "is required")
        if len(request.advancement_key) > MAX_ID_CHARS:
            raise InvalidArgument("advancement_key", f"is longer than {MAX_ID_CHARS} characters")
        validate_json_object(request.admission, "admission")
        validate_json_object(request.terminal, "terminal")
        validate_messages(request.messages, validated=self._validated)
        if request.token_budget < 0:
            raise InvalidArgument("token_budget", "must not be negative")
        validate_used_skills(request.used_skills)
        turn = FencedTurn(
            request.messages, request.advancement_key, request.admission.json, request.terminal.json
        )
        outcome = await self._turns.commit_turn(
            identity,
            turn,
            token_budget=request.token_budget,
            model=request.model,
            deadline=call_deadline(context),
        )
        _record_turn_attributes(outcome, request.token_budget or self._settings.default_token_budget)
        if not outcome.duplicate_turn:
            self.learning.learn(identity.tenant, request.messages, request.used_skills)
        return capture_pb2.CommitTurnResponse(
            status=capture_pb2.COMMIT_TURN_STATUS_DUPLICATE if outcome.duplicate_turn else committed,
            persisted_count=outcome.persisted_count,
            injected_skipped_count=outcome.injected_skipped_count,
            first_sequence=outcome.first_sequence,
            last_sequence=outcome.last_sequence,
            openviking_session_id=outcome.session_id,
            trigger_fired=outcome.trigger,
            compaction_checkpoint_id=outcome.checkpoint_id,
            estimated_tokens=outcome.estimated_tokens,
            capture_worthy=outcome.capture_worthy,
        )

    async def Ingest(  # noqa: N802
        self, request: capture_pb2.IngestRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.IngestResponse:
        if request.is_heartbeat:
            return capture_pb2.IngestResponse()
        identity = request_identity(request.identity, self._settings, session_required=True)
        validate_messages(request.messages, validated=self._validated)
        outcome = await self._turns.ingest(
            identity, request.messages, only_if_new=request.only_if_new, deadline=call_deadline(context)
        )
        return capture_pb2.IngestResponse(
            ingested_count=outcome.persisted_count,
            duplicate_count=outcome.duplicate_count,
            injected_skipped_count=outcome.injected_skipped_count,
            openviking_session_id=outcome.session_id,
        )

    async def StoreMemory(  # noqa: N802
        self, request: capture_pb2.StoreMemoryRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.StoreMemoryResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        memory = memories.check_store_request(request.text, request.category, request.scope)
        stored = await memories.store_memory(self._ov, identity, memory, deadline=call_deadline(context))
        self._memory_changes.changed(identity.tenant)
        return capture_pb2.StoreMemoryResponse(uri=stored.uri, created=stored.created)

    async def ForgetMemory(  # noqa: N802
        self, request: capture_pb2.ForgetMemoryRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.ForgetMemoryResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        target = request.WhichOneof("target")
        deadline = call_deadline(context)
        if target == "uri":
            outcome = await memories.forget_by_uri(self._ov, identity, request.uri, deadline=deadline)
        elif target == "query":
            outcome = await memories.forget_by_query(self._ov, identity, request.query, deadline=deadline)
        else:
            raise InvalidArgument("target", "set uri or query")
        if outcome.deleted_uris:
            self._memory_changes.changed(identity.tenant)
        return capture_pb2.ForgetMemoryResponse(
            deleted_uris=outcome.deleted_uris, candidates=outcome.candidates
        )

    async def FlushSessions(  # noqa: N802
        self, request: capture_pb2.FlushSessionsRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.FlushSessionsResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        if identity.session_id:
            streams = [identity]
        else:
            agent = request.identity.agent_id or None
            streams = self._turns.known.for_user(identity, agent_id=agent)
        checkpoints = await self._turns.flush(streams, deadline=call_deadline(context))
        return capture_pb2.FlushSessionsResponse(checkpoints=checkpoints)

    async def RegisterSkills(  # noqa: N802
        self, request: capture_pb2.RegisterSkillsRequest, context: aio.ServicerContext[object, object]
    ) -> capture_pb2.RegisterSkillsResponse:
        identity = request_identity(request.identity, self._settings, session_required=False)
        skills = validated_skills(request.skills)
        registration = await register_skills(
            self._ov,
            self._documents,
            identity.tenant,
            skills,
            deadline=call_deadline(context, REGISTER_SECONDS),
        )
        if registration.stored:
            self._memory_changes.changed(identity.tenant)
        return capture_pb2.RegisterSkillsResponse(
            stored_count=registration.stored, unchanged_count=registration.unchanged
        )
