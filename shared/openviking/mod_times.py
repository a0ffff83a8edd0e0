"""OpenViking's modification times (`modTime`, UTC, whole seconds) against this process's clock."""

from __future__ import annotations

from datetime import UTC, datetime


def settled(mod_time: str, now: float, seconds: float) -> bool:
    """Whether `mod_time` is more than `seconds` before `now` (epoch seconds). A change in the same
    second as a listing leaves the time unchanged, and what was just written may still be queued
    for embedding: a listing vouches only for entries settled this long. Unparsable: not settled."""
    try:
        when = datetime.fromisoformat(mod_time.replace("Z", "+00:00"))
    except ValueError:
        return False
    return when.replace(tzinfo=when.tzinfo or UTC).timestamp() < now - seconds
