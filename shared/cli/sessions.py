"""`context-engine assemble | expand | checkpoints | inspect`: one session as the engine sees it.

`assemble`, `expand` and `checkpoints` are the public gRPC calls (`contextengine_client`), so
they show what a host would get. `inspect` reads what the engine keeps in OpenViking for the
stream (its state document, the OpenViking sessions it wrote, the turn index) with the engine's
own configuration, because no RPC returns the engine's bookkeeping.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from contextengine.v1 import checkpoint_pb2, common_pb2
from contextengine_client import ContextEngine, user_message

from shared.config import Settings
from shared.domain.documents import DocumentStore
from shared.domain.identity import parse_identity
from shared.domain.stream_state import StreamStateStore
from shared.domain.turn_index import parse_turn_uri, session_index_uri
from shared.errors import BackendNotFound
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.runtime.context import build_openviking_client

Status = checkpoint_pb2.CheckpointStatus


def _message_line(message: common_pb2.ConversationMessage) -> str:
    role = common_pb2.MessageRole.Name(message.role).removeprefix("MESSAGE_ROLE_").lower()
    parts = []
    for block in message.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            parts.append(block.text.text)
        elif kind == "tool_call":
            parts.append(f"[tool_call {block.tool_call.name}] {block.tool_call.arguments.json}")
        elif kind == "tool_result":
            parts.append(
                f"[tool_result {block.tool_result.tool_name}] {block.tool_result.content[0].text.text}"
                if block.tool_result.content
                else f"[tool_result {block.tool_result.tool_name}]"
            )
        else:
            parts.append(f"[{kind}]")
    return f"{role:>11}: {textwrap.shorten(' '.join(parts), 160)}"


async def assemble(engine: ContextEngine, identity: common_pb2.Identity, prompt: str, budget: int) -> None:
    """A new session's first Assemble of `prompt`: what the model would see, and why."""
    answer = await engine.assemble(identity, [user_message(prompt)], prompt=prompt, token_budget=budget)
    packet = answer.packet
    print(
        f"{len(answer.messages)} messages, {answer.estimated_tokens} tokens"
        + (f", DEGRADED: {'; '.join(packet.degraded_reasons)}" if packet.degraded else "")
    )
    for message in answer.messages:
        print("  " + _message_line(message))
    print(
        f"recall query: {packet.recall_query!r}"
        + (f" (skipped: {packet.recall_skip_reason})" if packet.recall_skip_reason else "")
    )
    for item in packet.recalled_memories:
        print(f"  {item.kind:<6} {item.score:.2f} {item.said_at or '-':<16} {item.uri}")
        print(f"         {textwrap.shorten(item.content, 200)}")


async def expand(
    engine: ContextEngine, identity: common_pb2.Identity, uri: str, query: str, limit: int
) -> None:
    """The raw turns behind `uri`, page by page."""
    token = ""
    while True:
        page = await engine.expand_memory(identity, uri, query=query, limit=limit, page_token=token)
        for turn in page.turns:
            print(f"#{turn.turn.sequence:<5} {_message_line(turn.message)}")
            print(f"       from {turn.source_uri}")
        token = page.next_page_token
        if not token:
            break
    if page.checkpoint_id:
        print(f"checkpoint {page.checkpoint_id}")


async def checkpoints(engine: ContextEngine, identity: common_pb2.Identity) -> None:
    """The session's checkpoints (the user's, without a session), newest first."""
    token = ""
    while True:
        page = await engine.list_checkpoints(identity, page_size=50, page_token=token)
        for checkpoint in page.checkpoints:
            print(_checkpoint_line(checkpoint))
        token = page.next_page_token
        if not token:
            return


def _checkpoint_line(checkpoint: checkpoint_pb2.CompactCheckpoint) -> str:
    turns = checkpoint.source_turn_range
    failure = f" ({checkpoint.failure_reason})" if checkpoint.failure_reason else ""
    status = Status.Name(checkpoint.status).removeprefix("CHECKPOINT_STATUS_")
    session = checkpoint.host_session_id or checkpoint.session_id
    return (
        f"{checkpoint.checkpoint_id}  {status}{failure}  session {session}  "
        f"turns {turns.start_sequence}-{turns.end_sequence}  {checkpoint.archive_uri}"
    )


async def inspect(settings: Settings, identity: common_pb2.Identity) -> None:
    """What the engine holds for one stream: its state, its OpenViking sessions, the turn index."""
    who = parse_identity(identity, default_agent_id=settings.agent_id, session_required=True)
    openviking = build_openviking_client(settings)
    try:
        state = await StreamStateStore(DocumentStore(openviking)).load(who)
        if state is None:
            print(
                f"no stream for session {who.session_id!r} of agent {who.agent_id!r} (nothing captured yet)"
            )
            return
        print(
            f"stream {state.stream_id}: last sequence {state.last_sequence}, "
            f"{state.active_tokens} active tokens, {state.turns_since_compaction} turns / "
            f"{state.tokens_since_compaction} tokens since the last compaction"
        )
        if state.inflight:
            print(f"compactions in flight: {', '.join(c.checkpoint_id for c in state.inflight)}")
        print(f"checkpoints: {len(state.checkpoint_ids)}")
        if state.unindexed:
            oldest = min(u.since for u in state.unindexed).isoformat(timespec="seconds")
            ranges = ", ".join(f"{u.start}-{u.end}" for u in state.unindexed)
            print(f"turn index: claimed ranges not yet confirmed {ranges} (the oldest since {oldest})")
        for session_id in dict.fromkeys([*state.sessions, state.active_session]):
            await _show_session(openviking, who.tenant, session_id, active=session_id == state.active_session)
    finally:
        await openviking.aclose()


async def _show_session(
    openviking: OpenVikingClient, tenant: Tenant, session_id: str, *, active: bool
) -> None:
    try:
        info = await openviking.get_session(tenant, session_id)
        held = f"{info.message_count} live / {info.total_message_count} messages"
    except BackendNotFound:
        held = "not created yet"
    indexed = await _indexed_sequences(openviking, tenant, session_id)
    newest = f", the newest from sequence {max(indexed)}" if indexed else ""
    kind = "active" if active else "committed"
    print(f"  {kind} session {session_id}: {held}; turn index {len(indexed)} exchanges{newest}")


async def _indexed_sequences(openviking: OpenVikingClient, tenant: Tenant, session_id: str) -> Sequence[int]:
    """First sequences of the session's exchanges in the turn index (what recall can find)."""
    try:
        listing = await openviking.ls(tenant, session_index_uri(session_id), node_limit=10_000)
    except BackendNotFound:
        return []
    refs = [parse_turn_uri(entry.uri) for entry in listing.entries if not entry.is_dir]
    return sorted(ref.first_sequence for ref in refs if ref is not None)
