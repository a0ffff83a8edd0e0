"""One exception root for the local stack."""

from __future__ import annotations


class LocalStackError(Exception):
    """Root of every local-stack failure."""


class ProvisioningError(LocalStackError):
    """A private runtime could not be installed or is incomplete."""


class StartupError(LocalStackError):
    """A stack process exited or did not become ready in time."""
