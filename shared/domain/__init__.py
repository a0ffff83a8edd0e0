"""Domain model shared by the services: identity, messages, envelopes, state, checkpoints."""
