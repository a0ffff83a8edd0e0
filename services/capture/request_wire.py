"""`AfterTurnRequest` as it arrives, with each host message still in its wire bytes
(`shared.runtime.request_wire`): a host resends its whole transcript on every AfterTurn."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from contextengine.v1 import capture_pb2, common_pb2, envelope_pb2

from shared.runtime.request_wire import WireCodec


class AfterTurnWire(Protocol):
    """The fields of `AfterTurnRequest`, its `messages` as wire bytes."""

    identity: common_pb2.Identity
    messages: Sequence[bytes]
    pre_prompt_message_count: int
    token_budget: int
    is_heartbeat: bool
    model: str
    used_skills: Sequence[envelope_pb2.UsedSkill]


AFTER_TURN_WIRE: WireCodec[AfterTurnWire] = WireCodec(capture_pb2.AfterTurnRequest)
