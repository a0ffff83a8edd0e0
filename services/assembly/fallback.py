"""The legacy `<relevant-memories>` block for hosts without the full lifecycle (docs/design.md §3.1).

Same retrieval and bounds as auto recall; only the injected shape differs.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.assembly.memory_rules import memory_line
from services.assembly.recall import RecalledItem

OPEN_TAG = "<relevant-memories>"
CLOSE_TAG = "</relevant-memories>"
INTRO = "The following OpenViking memories may be relevant:"


def relevant_memories_block(items: Sequence[RecalledItem]) -> str:
    """The bounded block, or "" when nothing qualified."""
    if not items:
        return ""
    lines = [memory_line(item.candidate.category, item.content) for item in items]
    return "\n".join([OPEN_TAG, INTRO, *lines, CLOSE_TAG])
