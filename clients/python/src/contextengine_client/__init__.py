"""A thin typed client of the Viking Context Engine (`contextengine.v1`; stubs in `contextengine`)."""

from contextengine_client.client import ContextEngine, Deadlines, service_config
from contextengine_client.conversation import (
    Conversation,
    assistant_message,
    identity,
    text_message,
    user_message,
)

__all__ = [
    "ContextEngine",
    "Conversation",
    "Deadlines",
    "assistant_message",
    "identity",
    "service_config",
    "text_message",
    "user_message",
]
