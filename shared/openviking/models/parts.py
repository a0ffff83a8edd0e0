"""Message parts: what `add_message` sends and what context/archives return."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, JsonValue, Tag

ToolStatus = Literal["pending", "running", "completed", "error"]
ContextType = Literal["memory", "resource", "skill"]
MessageKind = Literal["user_query", "assistant_step", "tool_transport", "checkpoint"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class TextPart(_Part):
    type: Literal["text"] = "text"
    text: str = ""


class ContextPart(_Part):
    """A reference to a memory/resource/skill URI with its abstract."""

    type: Literal["context"] = "context"
    uri: str
    context_type: ContextType = "memory"
    abstract: str = ""


class ToolPart(_Part):
    """A tool call and its result. `tool_input` must be a JSON object; `tool_output` a string."""

    type: Literal["tool"] = "tool"
    tool_id: str = ""
    tool_name: str = ""
    tool_input: dict[str, JsonValue] = Field(default_factory=dict)
    tool_output: str = ""
    tool_status: ToolStatus = "pending"
    duration_ms: float | None = None
    tool_uri: str | None = None
    skill_uri: str | None = None


class OtherPart(_Part):
    """A returned part of a type this client does not model (e.g. `image_url`); kept raw."""

    model_config = ConfigDict(frozen=True, extra="allow")
    type: str


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in ("text", "context", "tool") else "other"


Part = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ContextPart, Tag("context")]
    | Annotated[ToolPart, Tag("tool")]
    | Annotated[OtherPart, Tag("other")],
    Discriminator(_part_tag),
]
"""Any message part; unknown types parse as `OtherPart`."""

SendablePart = TextPart | ContextPart | ToolPart
"""The part types `add_message` accepts."""


class NewMessage(BaseModel):
    """One message to append to a session (`parts` wins over `content` when both are set)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str
    parts: tuple[SendablePart, ...] | None = None
    content: str | None = None
    created_at: str | None = None
    """ISO-8601; stored verbatim by OpenViking."""
    turn_id: str | None = None
    message_kind: MessageKind | None = None
    source_message_ids: tuple[str, ...] | None = None
    peer_id: str | None = None

    def to_body(self) -> dict[str, Any]:
        """The JSON body of the add-message request (unset fields omitted)."""
        return self.model_dump(mode="json", exclude_none=True)
