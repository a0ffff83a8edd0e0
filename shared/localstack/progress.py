"""Visible progress lines for long steps (installs, start-ups)."""

from __future__ import annotations

import sys
from collections.abc import Callable

Reporter = Callable[[str], None]
"""Receives one human-readable progress line."""


def print_progress(line: str) -> None:
    """Default reporter: one line on stderr, flushed at once."""
    print(f"[localstack] {line}", file=sys.stderr, flush=True)


def silent(_line: str) -> None:
    """Reporter that drops every line."""
