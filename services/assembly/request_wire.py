"""`AssembleRequest` as it arrives, with each host message still in its wire bytes
(`shared.runtime.request_wire`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from contextengine.v1 import assembly_pb2, common_pb2

from shared.runtime.request_wire import WireCodec


class AssembleWire(Protocol):
    """The fields of `AssembleRequest`, its `messages` as wire bytes."""

    identity: common_pb2.Identity
    messages: Sequence[bytes]
    token_budget: int
    model: str
    prompt: str
    overrides: common_pb2.SettingsOverrides


ASSEMBLE_WIRE: WireCodec[AssembleWire] = WireCodec(assembly_pb2.AssembleRequest)
