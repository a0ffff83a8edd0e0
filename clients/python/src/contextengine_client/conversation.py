"""`Conversation`: one host session and its turn loop, so the call order needs no guessing.

Per turn: `assemble(prompt)` before the model call (it adds the user message to the transcript
and asks the engine what the model should see), then `after_turn(reply...)` with what the model
answered (AfterTurn with the whole transcript and the count of messages before this turn's
prompt, which is what `pre_prompt_message_count` means).
"""

from __future__ import annotations

import uuid

from contextengine.v1 import assembly_pb2, capture_pb2, common_pb2

from contextengine_client.client import ContextEngine

Message = common_pb2.ConversationMessage


def text_message(role: common_pb2.MessageRole.ValueType, text: str) -> Message:
    """A message of one text block with a fresh id (ids must stay the same on a retry)."""
    return Message(
        id=uuid.uuid4().hex,
        role=role,
        content=[common_pb2.ContentBlock(text=common_pb2.TextBlock(text=text))],
    )


def user_message(text: str) -> Message:
    return text_message(common_pb2.MESSAGE_ROLE_USER, text)


def assistant_message(text: str) -> Message:
    return text_message(common_pb2.MESSAGE_ROLE_ASSISTANT, text)


def identity(account_id: str, user_id: str, session_id: str, agent_id: str = "") -> common_pb2.Identity:
    """Who is talking: `account_id` and `user_id` on every call; `session_id` on the turn loop's
    calls (Assemble, AfterTurn, CommitTurn, Compact); `agent_id` empty = the engine's `agentId`."""
    return common_pb2.Identity(
        account_id=account_id, user_id=user_id, agent_id=agent_id, session_id=session_id
    )


class Conversation:
    """A session's transcript, kept by the host and resent whole on every call."""

    def __init__(
        self,
        engine: ContextEngine,
        who: common_pb2.Identity,
        *,
        token_budget: int = 0,
        model: str = "",
    ) -> None:
        self.engine = engine
        self.identity = who
        self.token_budget = token_budget
        """The model's context window; 0 = the engine's `defaultTokenBudget` (128000)."""
        self.model = model
        """The model's name, so the engine counts tokens with its tokenizer."""
        self.transcript: list[Message] = []
        self._before_prompt: int | None = None

    async def assemble(self, prompt: str) -> assembly_pb2.AssembleResponse:
        """Add the user's `prompt` and get the context to send to the model (`.messages`).

        Called again before `after_turn`, it asks anew for the same open turn (the prompt
        replaces the open turn's, the transcript before it is unchanged)."""
        if self._before_prompt is not None:
            del self.transcript[self._before_prompt :]
        self._before_prompt = len(self.transcript)
        self.transcript.append(user_message(prompt))
        return await self.engine.assemble(
            self.identity, self.transcript, prompt=prompt, token_budget=self.token_budget, model=self.model
        )

    async def after_turn(self, *reply: Message | str) -> capture_pb2.AfterTurnResponse:
        """Add the model's reply (texts become assistant messages; tool calls and results go in
        as messages) and store the turn."""
        if self._before_prompt is None:
            raise RuntimeError("after_turn() ends a turn that assemble() started")
        self.transcript.extend(assistant_message(m) if isinstance(m, str) else m for m in reply)
        before, self._before_prompt = self._before_prompt, None
        return await self.engine.after_turn(
            self.identity,
            self.transcript,
            pre_prompt_message_count=before,
            token_budget=self.token_budget,
            model=self.model,
        )
