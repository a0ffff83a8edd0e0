"""Short handles for recalled items: what the model passes to `memory_expand`.

A recalled exchange's full URI (`viking://user/<user>/memories/ce-turns/<session>/0000012.md`)
costs ~37 tokens, more than many exchanges' text; the model only needs something `memory_expand`
resolves. So an exchange is named `t<12 decimal digits of its session id's SHA-256>.<first
sequence>` (`t418306755912.12`: 7 tokens with o200k_base where 10 hex digits took 10, since
tokenizers split digits in groups of three but hex in ones and twos), which ExpandMemory
resolves by listing the caller's turn-index
folders (one `ls`, only on expand). A stored memory keeps its URI in the caller's own space
(`viking://~/memories/...`): ExpandMemory takes those as they are.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

from shared.domain.turn_index import parse_turn_uri

DIGEST_DIGITS = 12
"""~40 bits of the session id: two of one user's 10,000 sessions share a digest with a chance of
~5e-5 (then the first listed wins)."""
_TURN_HANDLE = re.compile(rf"^t(?P<digest>\d{{{DIGEST_DIGITS}}})\.(?P<seq>\d{{1,7}})$")
_USER_PREFIX = re.compile(r"^viking://user/[^/]+/")
REMEMBERED_HANDLES = 65_536


class TurnHandle(NamedTuple):
    digest: str
    first_sequence: int


def session_digest(session_id: str) -> str:
    value = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:8], "big")
    return f"{value % 10**DIGEST_DIGITS:0{DIGEST_DIGITS}d}"


@lru_cache(maxsize=REMEMBERED_HANDLES)
def handle_for(uri: str) -> str:
    """The handle of a recalled item's URI (a turn-index document or a memory)."""
    turn = parse_turn_uri(uri)
    if turn is not None:
        return f"t{session_digest(turn.session_id)}.{turn.first_sequence}"
    return _USER_PREFIX.sub("viking://~/", uri, count=1)


def parse_turn_handle(value: str) -> TurnHandle | None:
    match = _TURN_HANDLE.match(value)
    if match is None:
        return None
    return TurnHandle(match["digest"], int(match["seq"]))


def sessions_for(handle: TurnHandle, session_ids: Iterable[str]) -> list[str]:
    """The sessions (of those listed) whose digest is the handle's, in the given order."""
    return [s for s in session_ids if session_digest(s) == handle.digest]
