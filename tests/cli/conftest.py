"""The CLI runs against the same in-process engine as the client packages' tests."""

from tests.clients.conftest import engine_address

__all__ = ["engine_address"]
