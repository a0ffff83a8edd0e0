"""The bad-input corpus: request builders and the cases (identity, messages)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from contextengine.v1 import (
    assembly_pb2,
    capture_pb2,
    common_pb2,
    compaction_pb2,
)
from google.protobuf.message import Message

pytestmark = pytest.mark.stack

Role = common_pb2.MessageRole
ACCOUNT = f"ce-bad-{uuid.uuid4().hex[:8]}"
VICTIM = common_pb2.Identity(account_id=ACCOUNT, user_id="victim", agent_id="main", session_id="victim-s")
UNKNOWN_CHECKPOINT = "cp-0123456789abcdef0123-1760000000000-abcdef"


def ident(**changes: str) -> common_pb2.Identity:
    identity = common_pb2.Identity()
    identity.CopyFrom(VICTIM)
    for key, value in changes.items():
        setattr(identity, key, value)
    return identity


def text(
    t: str, role: Role.ValueType = Role.MESSAGE_ROLE_USER, **fields: Any
) -> common_pb2.ConversationMessage:
    return common_pb2.ConversationMessage(
        role=role, content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=t))], **fields
    )


def call(arguments: str = "{}", call_id: str = "c1", name: str = "shell") -> common_pb2.ConversationMessage:
    block = common_pb2.ToolCallBlock(id=call_id, name=name, arguments=common_pb2.JsonValue(json=arguments))
    return common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_ASSISTANT, content=[common_pb2.ContentBlock(tool_call=block)]
    )


def result(
    call_id: str = "c1", details: str = "", *content: common_pb2.ContentBlock
) -> common_pb2.ConversationMessage:
    block = common_pb2.ToolResultBlock(
        tool_call_id=call_id, tool_name="shell", details=common_pb2.JsonValue(json=details), content=content
    )
    return common_pb2.ConversationMessage(
        role=Role.MESSAGE_ROLE_TOOL_RESULT, content=[common_pb2.ContentBlock(tool_result=block)]
    )


def after_turn(
    *messages: common_pb2.ConversationMessage, identity: common_pb2.Identity = VICTIM, **fields: Any
) -> capture_pb2.AfterTurnRequest:
    return capture_pb2.AfterTurnRequest(identity=identity, messages=messages, **fields)


def store(identity: common_pb2.Identity = VICTIM, **fields: Any) -> capture_pb2.StoreMemoryRequest:
    return capture_pb2.StoreMemoryRequest(identity=identity, **{"text": "remember this", **fields})


def expand(reference: str, **fields: Any) -> compaction_pb2.ExpandMemoryRequest:
    return compaction_pb2.ExpandMemoryRequest(identity=VICTIM, summary_or_memory_uri=reference, **fields)


@dataclass(frozen=True)
class Case:
    rpc: str
    """"service.Method" on the engine's stubs."""
    request: Message
    code: str
    field: str


THINKING = common_pb2.ContentBlock(thinking=common_pb2.ThinkingBlock(thinking="hmm"))
NO_URI_IMAGE = common_pb2.ContentBlock(image=common_pb2.ImageBlock(mime_type="image/png"))
ARGS = "messages[1].content[0].tool_call.arguments.json"
HOST = "messages[0].host_fields.json"
DETAILS = "messages[1].content[0].tool_result.details.json"


IDENTITY_CASES: dict[str, Case] = {
    "empty account_id (capture)": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(account_id="")),
        "INVALID_ARGUMENT",
        "identity.account_id",
    ),
    "empty account_id (store)": Case(
        "capture.StoreMemory", store(ident(account_id="")), "INVALID_ARGUMENT", "identity.account_id"
    ),
    "empty account_id (assemble)": Case(
        "assembly.Assemble",
        assembly_pb2.AssembleRequest(identity=ident(account_id=""), messages=[text("hi")]),
        "INVALID_ARGUMENT",
        "identity.account_id",
    ),
    "empty account_id (expand)": Case(
        "compaction.ExpandMemory",
        compaction_pb2.ExpandMemoryRequest(
            identity=ident(account_id=""), summary_or_memory_uri=UNKNOWN_CHECKPOINT
        ),
        "INVALID_ARGUMENT",
        "identity.account_id",
    ),
    "reserved account_id": Case(
        "capture.StoreMemory", store(ident(account_id="_system")), "INVALID_ARGUMENT", "identity.account_id"
    ),
    "account_id with slash": Case(
        "capture.StoreMemory", store(ident(account_id="a/b")), "INVALID_ARGUMENT", "identity.account_id"
    ),
    "account_id with two @": Case(
        "capture.StoreMemory", store(ident(account_id="a@b@c")), "INVALID_ARGUMENT", "identity.account_id"
    ),
    "account_id ..": Case(
        "capture.StoreMemory", store(ident(account_id="..")), "INVALID_ARGUMENT", "identity.account_id"
    ),
    "empty user_id": Case(
        "capture.StoreMemory", store(ident(user_id="")), "INVALID_ARGUMENT", "identity.user_id"
    ),
    "user_id traversal": Case(
        "capture.StoreMemory", store(ident(user_id="../bob")), "INVALID_ARGUMENT", "identity.user_id"
    ),
    "user_id with space": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(user_id="al ice")),
        "INVALID_ARGUMENT",
        "identity.user_id",
    ),
    "user_id too long": Case(
        "capture.StoreMemory", store(ident(user_id="u" * 256)), "INVALID_ARGUMENT", "identity.user_id"
    ),
    "agent_id with slash": Case(
        "capture.StoreMemory", store(ident(agent_id="a/b")), "INVALID_ARGUMENT", "identity.agent_id"
    ),
    "agent_id ..": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(agent_id="..")),
        "INVALID_ARGUMENT",
        "identity.agent_id",
    ),
    "agent_id non-ascii": Case(
        "capture.StoreMemory", store(ident(agent_id="agént")), "INVALID_ARGUMENT", "identity.agent_id"
    ),
    "session_id ..": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(session_id="..")),
        "INVALID_ARGUMENT",
        "identity.session_id",
    ),
    "session_id .": Case(
        "compaction.Compact",
        compaction_pb2.CompactRequest(identity=ident(session_id="."), force=True),
        "INVALID_ARGUMENT",
        "identity.session_id",
    ),
    "session_id with slash": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(session_id="a/b")),
        "INVALID_ARGUMENT",
        "identity.session_id",
    ),
    "session_id with NUL": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(session_id="s\x00")),
        "INVALID_ARGUMENT",
        "identity.session_id",
    ),
    "missing session_id (capture)": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(session_id="")),
        "INVALID_ARGUMENT",
        "identity.session_id",
    ),
    "missing session_id (compact)": Case(
        "compaction.Compact",
        compaction_pb2.CompactRequest(identity=ident(session_id="")),
        "INVALID_ARGUMENT",
        "identity.session_id",
    ),
    "session_key with NUL": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), identity=ident(session_key="k\x00")),
        "INVALID_ARGUMENT",
        "identity.session_key",
    ),
    "session_key with escape": Case(
        "capture.StoreMemory",
        store(ident(session_key="\x1b[31m")),
        "INVALID_ARGUMENT",
        "identity.session_key",
    ),
    "session_key too long": Case(
        "capture.StoreMemory", store(ident(session_key="k" * 513)), "INVALID_ARGUMENT", "identity.session_key"
    ),
}

MESSAGE_CASES: dict[str, Case] = {
    "role unspecified": Case(
        "capture.AfterTurn",
        after_turn(text("hi", Role.MESSAGE_ROLE_UNSPECIFIED)),
        "INVALID_ARGUMENT",
        "messages[0].role",
    ),
    "role 99": Case("capture.AfterTurn", after_turn(text("hi", 99)), "INVALID_ARGUMENT", "messages[0].role"),  # type: ignore[arg-type]
    "message id with NUL": Case(
        "capture.AfterTurn", after_turn(text("hi", id="m\x00")), "INVALID_ARGUMENT", "messages[0].id"
    ),
    "message id too long": Case(
        "capture.AfterTurn", after_turn(text("hi", id="m" * 513)), "INVALID_ARGUMENT", "messages[0].id"
    ),
    "empty content block": Case(
        "capture.AfterTurn",
        after_turn(
            common_pb2.ConversationMessage(role=Role.MESSAGE_ROLE_USER, content=[common_pb2.ContentBlock()])
        ),
        "INVALID_ARGUMENT",
        "messages[0].content[0]",
    ),
    "tool call in a user message": Case(
        "capture.AfterTurn",
        after_turn(common_pb2.ConversationMessage(role=Role.MESSAGE_ROLE_USER, content=call().content)),
        "INVALID_ARGUMENT",
        "messages[0].content[0]",
    ),
    "tool call without id": Case(
        "capture.AfterTurn",
        after_turn(text("q"), call(call_id="")),
        "INVALID_ARGUMENT",
        "messages[1].content[0].tool_call.id",
    ),
    "tool call without name": Case(
        "capture.AfterTurn",
        after_turn(text("q"), call(name="")),
        "INVALID_ARGUMENT",
        "messages[1].content[0].tool_call.name",
    ),
    "tool call id with NUL": Case(
        "capture.AfterTurn",
        after_turn(text("q"), call(call_id="c\x00")),
        "INVALID_ARGUMENT",
        "messages[1].content[0].tool_call.id",
    ),
    "arguments NaN": Case(
        "capture.AfterTurn", after_turn(text("q"), call('{"x": NaN}')), "INVALID_ARGUMENT", ARGS
    ),
    "arguments Infinity": Case(
        "capture.AfterTurn", after_turn(text("q"), call('{"x": Infinity}')), "INVALID_ARGUMENT", ARGS
    ),
    "arguments -Infinity": Case(
        "capture.AfterTurn", after_turn(text("q"), call("[-Infinity]")), "INVALID_ARGUMENT", ARGS
    ),
    "arguments single quotes": Case(
        "capture.AfterTurn", after_turn(text("q"), call("{'a': 1}")), "INVALID_ARGUMENT", ARGS
    ),
    "arguments trailing comma": Case(
        "capture.AfterTurn", after_turn(text("q"), call('{"a": 1,}')), "INVALID_ARGUMENT", ARGS
    ),
    "arguments truncated": Case(
        "capture.AfterTurn", after_turn(text("q"), call("[1, 2")), "INVALID_ARGUMENT", ARGS
    ),
    "arguments nested 200 deep": Case(
        "capture.AfterTurn", after_turn(text("q"), call("[" * 200 + "]" * 200)), "INVALID_ARGUMENT", ARGS
    ),
    "arguments nested 100k deep": Case(
        "capture.AfterTurn", after_turn(text("q"), call("[" * 100_000)), "INVALID_ARGUMENT", ARGS
    ),
    "arguments with a BOM": Case(
        "capture.AfterTurn", after_turn(text("q"), call("\ufeff{}")), "INVALID_ARGUMENT", ARGS
    ),
    "host_fields not an object": Case(
        "capture.AfterTurn",
        after_turn(text("hi", host_fields=common_pb2.JsonValue(json="[]"))),
        "INVALID_ARGUMENT",
        HOST,
    ),
    "host_fields with NaN": Case(
        "capture.AfterTurn",
        after_turn(text("hi", host_fields=common_pb2.JsonValue(json='{"usage": NaN}'))),
        "INVALID_ARGUMENT",
        HOST,
    ),
    "host_fields trailing garbage": Case(
        "capture.AfterTurn",
        after_turn(text("hi", host_fields=common_pb2.JsonValue(json='{"a": 1} x'))),
        "INVALID_ARGUMENT",
        HOST,
    ),
    "tool result without a call": Case(
        "capture.AfterTurn",
        after_turn(text("q"), result("nope")),
        "INVALID_ARGUMENT",
        "messages[1].content[0].tool_result.tool_call_id",
    ),
    "tool result without call id": Case(
        "capture.AfterTurn",
        after_turn(call(), result("")),
        "INVALID_ARGUMENT",
        "messages[1].content[0].tool_result.tool_call_id",
    ),
    "tool result with two blocks": Case(
        "capture.AfterTurn",
        after_turn(
            call(),
            common_pb2.ConversationMessage(
                role=Role.MESSAGE_ROLE_TOOL_RESULT, content=[*result().content, *text("x").content]
            ),
        ),
        "INVALID_ARGUMENT",
        "messages[1].content",
    ),
    "tool result details broken": Case(
        "capture.AfterTurn", after_turn(call(), result("c1", "{")), "INVALID_ARGUMENT", DETAILS
    ),
    "tool result details Infinity": Case(
        "capture.AfterTurn", after_turn(call(), result("c1", "Infinity")), "INVALID_ARGUMENT", DETAILS
    ),
    "thinking inside a tool result": Case(
        "capture.AfterTurn",
        after_turn(call(), result("c1", "", THINKING)),
        "INVALID_ARGUMENT",
        "messages[1].content[0].tool_result.content[0]",
    ),
    "image without uri": Case(
        "capture.AfterTurn",
        after_turn(common_pb2.ConversationMessage(role=Role.MESSAGE_ROLE_USER, content=[NO_URI_IMAGE])),
        "INVALID_ARGUMENT",
        "messages[0].content[0].image.uri",
    ),
    "tool result block in an assistant message": Case(
        "capture.AfterTurn",
        after_turn(
            call(), common_pb2.ConversationMessage(role=Role.MESSAGE_ROLE_ASSISTANT, content=result().content)
        ),
        "INVALID_ARGUMENT",
        "messages[1].content[0]",
    ),
    "negative pre_prompt_message_count": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), pre_prompt_message_count=-1),
        "INVALID_ARGUMENT",
        "pre_prompt_message_count",
    ),
    "pre_prompt_message_count past the end": Case(
        "capture.AfterTurn",
        after_turn(text("hi"), pre_prompt_message_count=2),
        "INVALID_ARGUMENT",
        "pre_prompt_message_count",
    ),
    "negative token_budget (capture)": Case(
        "capture.AfterTurn", after_turn(text("hi"), token_budget=-1), "INVALID_ARGUMENT", "token_budget"
    ),
    "ingest NaN": Case(
        "capture.Ingest",
        capture_pb2.IngestRequest(identity=VICTIM, messages=[text("q"), call('{"n": NaN}')]),
        "INVALID_ARGUMENT",
        ARGS,
    ),
}
