"""The lexical leg's index: every exchange of a user's turn index in SQLite FTS5, per replica.

Why a derived index: OpenViking's own keyword search (`search/search` with `search_type:
keywords`) needs VikingDB's full-text index, which the embedded backend does not have (it
answers 400 "Keyword search is not supported by the configured vector backend"), and BM25 over
the semantic find's 200 hits only reorders what the embedding already found: it cannot bring
back an exchange the embedding missed, and misses more as history grows. So each assembly
replica keeps an index of its own, derived from OpenViking (the source of truth) and never
written back:

- per user, one FTS5 table of the turn-index documents (uri, text), ranked by FTS5's BM25;
- synced in the background at most every `refresh_seconds`: one paged `ls` of the user's
  turn-index folders (one per OpenViking session, with its modification time), then one
  `search/grep` per new or changed folder, whose matches are the folder's documents line by line
  (no read per document); a folder removed (a forgotten session) drops its rows;
- Assemble never waits for it: a sync a search starts begins once that call is answered
  (`after_answer`: its listing and greps do not compete in OpenViking with the call's own
  `find`); until a user's first sync is done the lexical leg ranks the semantic pool as before,
  and an exchange written since the last sync is found by the semantic leg until the next one;
- bounded: at most `max_users` users' tables, the least recently searched dropped;
- its last listing also tells which of the user's sessions the turn index held
  (`streams_listed`): the summaries read no state for a stream it never held.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from services.assembly.lexical import documents
from services.assembly.ports import Grep
from shared.domain.stream_state import stream_of_session
from shared.domain.turn_index import TURN_INDEX_ROOT, is_turn_uri
from shared.domain.turn_index_folders import FolderLister, turn_index_folders
from shared.openviking.mod_times import settled
from shared.openviking.models.search import GrepResult
from shared.openviking.tenant import Tenant
from shared.runtime.answer_first import after_answer

log = logging.getLogger(__name__)

REFRESH_SECONDS = 30.0
"""How old a user's listing may get before a search starts a sync (in the background). Counted
from the listing, not from the end of the sync: the summaries trust a listing for 30 s
(`streams_listed`), and a user's first sync (10,000 exchanges: ~6 s of greps after its
listing) would otherwise leave the listing untrusted for that long each time it is done.
While a sync runs, a listing older than the summaries trust is not used. Tried: a sync every
20 s of a listing's age, so that an active user's listing is always trusted; no measurable
gain, and when syncs land moves the hard recall tier's 1k cells by about a point run to run
either way."""
SETTLE_SECONDS = 10.0
"""A folder changed this recently is grepped again at the next sync: a document written in the
same second as the grep would otherwise keep the folder's modification time unchanged."""
MAX_USERS = 256
FOLDER_LINES = 100_000
"""grep node_limit per session folder (lines; an exchange document has a few)."""
SYNC_CONCURRENCY = 4
_SAFE_TERM = re.compile(r"[^\w@./-]+")


class IndexSource(FolderLister, Grep, Protocol):
    """What the sync reads from OpenViking: folder listings and grep."""


def fts_query(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of `terms` (each a quoted phrase: `inc-48213` matches the
    tokens `inc 48213` next to each other)."""
    phrases = [_SAFE_TERM.sub(" ", term).strip() for term in terms]
    return " OR ".join(f'"{phrase}"' for phrase in phrases if phrase)


def folder_documents(result: GrepResult) -> dict[str, str]:
    """A session folder's turn-index documents from a grep matching every line (the documents
    rebuilt as the lexical leg rebuilds grep matches)."""
    return {uri: text.strip() for uri, text in documents(result).items() if is_turn_uri(uri)}


class IndexedExchange(NamedTuple):
    """A match of the index: which exchange, its BM25 score and its row, by which its text is
    read once it is needed (`ExchangeIndex.text`; most matches are in the semantic pool, which
    carries their text, or never reach the context)."""

    uri: str
    score: float
    row: int


@dataclass
class _UserIndex:
    table: str
    folders: dict[str, str] = field(default_factory=dict)
    """Session id -> the modification time its rows were synced at ("" = grep again)."""
    synced_at: float | None = None
    """Monotonic time of the last finished sync (None: never; the table is not searched)."""
    listed_at: float | None = None
    """Monotonic time of the listing `folders` came from (None: none yet)."""
    streams: frozenset[str] = frozenset()
    """The streams of the listed sessions (`stream_of_session`), derived once per listing: every
    opening Assemble looks its stream up here."""
    changed_at: float | None = None
    """When a change to the user's memory was last announced (`forget_listing`): a listing
    older than it is not vouched for."""
    syncing: asyncio.Task[None] | None = None


class ExchangeIndex:
    """One replica's FTS5 index of its users' exchanges (in memory; rebuilt from OpenViking)."""

    def __init__(
        self,
        source: IndexSource,
        *,
        refresh_seconds: float = REFRESH_SECONDS,
        max_users: int = MAX_USERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._clock = clock
        self._refresh = refresh_seconds
        self._max_users = max_users
        self._db = sqlite3.connect(":memory:", isolation_level=None)
        self._users: OrderedDict[tuple[str, str], _UserIndex] = OrderedDict()
        self._tables = 0

    def search(self, tenant: Tenant, terms: Sequence[str], limit: int) -> list[IndexedExchange] | None:
        """The user's exchanges matching any of `terms`, best BM25 first; None while the user's
        index has never been synced. Starts a background sync when the index is stale. Their
        texts are not read here (`text`): the search runs while the semantic `find` is in
        flight, on the cores OpenViking and the embedder need for it."""
        user = self._user(tenant)
        self._maybe_sync(tenant, user)
        if user.synced_at is None:
            return None
        query = fts_query(terms)
        if not query:
            return []
        rows = self._db.execute(
            f"SELECT uri, bm25({user.table}) AS rank, rowid FROM {user.table} "
            f"WHERE {user.table} MATCH ? ORDER BY rank LIMIT ?",
            (query, limit),
        ).fetchall()
        return [IndexedExchange(uri, -rank, row) for uri, rank, row in rows]

    def text(self, tenant: Tenant, hit: IndexedExchange) -> str | None:
        """The exchange's indexed text; None when a sync or the user's eviction replaced its
        row since the search."""
        user = self._users.get((tenant.account_id, tenant.user_id))
        if user is None:
            return None
        row = self._db.execute(f"SELECT uri, body FROM {user.table} WHERE rowid = ?", (hit.row,)).fetchone()
        return row[1] if row is not None and row[0] == hit.uri else None

    def apart(self, tenant: Tenant, terms: Sequence[str], others: Sequence[str]) -> frozenset[str] | None:
        """Those of `terms` the user's exchanges never say, or say alongside `others` no more
        often than chance would (`n(term and others) * n <= n(term) * n(others)`: no positive
        association); when no exchange says any of `others`, only the never-said ones. None while
        the user was never synced. FTS5 counts: one for `others`, two per term."""
        user = self._users.get((tenant.account_id, tenant.user_id))
        if user is None or user.synced_at is None:
            return None
        count = f"SELECT count(*) FROM {user.table} WHERE {user.table} MATCH ?"
        alongside = fts_query(others)
        with_others = self._db.execute(count, (alongside,)).fetchone()[0] if alongside else 0
        total = self._db.execute(f"SELECT count(*) FROM {user.table}_docsize").fetchone()[0]  # no scan
        apart = set()
        for term in terms:
            query = fts_query([term])
            said = self._db.execute(count, (query,)).fetchone()[0] if query else 0
            if not said:
                apart.add(term)
            elif with_others:
                both = self._db.execute(count, (f"{query} AND ({alongside})",)).fetchone()[0]
                if both * total <= said * with_others:
                    apart.add(term)
        return frozenset(apart)

    def streams_listed(self, tenant: Tenant, max_age: float) -> Collection[str] | None:
        """The streams whose sessions the user's turn index held at its last listing, if that
        listing is at most `max_age` seconds old and nothing changed the user's memory since
        (`forget_listing`); else None. Costs no request: the listing is the background sync's."""
        user = self._users.get((tenant.account_id, tenant.user_id))
        if user is None or user.listed_at is None or self._clock() - user.listed_at > max_age:
            return None
        if user.changed_at is not None and user.changed_at >= user.listed_at:
            return None
        return user.streams

    def forget_listing(self, tenant: Tenant) -> None:
        """Stop vouching for the user's last listing (a change announced in this process, such as
        a commit, may postdate it) until the next sync lists again."""
        user = self._users.get((tenant.account_id, tenant.user_id))
        if user is not None:
            user.changed_at = self._clock()

    async def sync(self, tenant: Tenant) -> None:
        """Bring the user's index up to date now (what the background does)."""
        user = self._user(tenant)
        if user.syncing is None or user.syncing.done():
            user.syncing = asyncio.ensure_future(self._sync(tenant, user))
        await asyncio.shield(user.syncing)

    async def aclose(self) -> None:
        tasks = [u.syncing for u in self._users.values() if u.syncing is not None and not u.syncing.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._db.close()

    def _user(self, tenant: Tenant) -> _UserIndex:
        key = (tenant.account_id, tenant.user_id)
        user = self._users.get(key)
        if user is None:
            self._tables += 1
            user = _UserIndex(f"x{self._tables}")
            self._db.execute(
                f"CREATE VIRTUAL TABLE {user.table} USING fts5(uri UNINDEXED, session UNINDEXED, body, "
                "tokenize = 'unicode61 remove_diacritics 2')"
            )
            self._users[key] = user
            while len(self._users) > self._max_users:
                _, dropped = self._users.popitem(last=False)
                if dropped.syncing is not None:
                    dropped.syncing.cancel()
                self._db.execute(f"DROP TABLE {dropped.table}")
        self._users.move_to_end(key)
        return user

    def _maybe_sync(self, tenant: Tenant, user: _UserIndex) -> None:
        if user.syncing is not None and not user.syncing.done():
            return
        if user.listed_at is not None and self._clock() - user.listed_at < self._refresh:
            return
        user.syncing = asyncio.ensure_future(self._sync_after_answer(tenant, user))
        user.syncing.add_done_callback(_log_failure)

    async def _sync_after_answer(self, tenant: Tenant, user: _UserIndex) -> None:
        await after_answer()
        await self._sync(tenant, user)

    async def _sync(self, tenant: Tenant, user: _UserIndex) -> None:
        now, listed_at = time.time(), self._clock()
        listed = await turn_index_folders(self._source, tenant)
        changed = [s for s, mod_time in listed.items() if not mod_time or user.folders.get(s) != mod_time]
        gate = asyncio.Semaphore(SYNC_CONCURRENCY)

        async def refresh(session_id: str) -> None:
            async with gate:
                result = await self._source.grep(
                    tenant, f"{TURN_INDEX_ROOT}/{session_id}", "^", node_limit=FOLDER_LINES
                )
            self._replace(user.table, session_id, folder_documents(result))

        await asyncio.gather(*(refresh(s) for s in changed))
        for session_id in set(user.folders) - set(listed):
            self._db.execute(f"DELETE FROM {user.table} WHERE session = ?", (session_id,))
        user.folders = {s: (t if settled(t, now, SETTLE_SECONDS) else "") for s, t in listed.items()}
        user.streams = frozenset(filter(None, map(stream_of_session, listed)))
        user.synced_at = self._clock()
        user.listed_at = listed_at

    def _replace(self, table: str, session_id: str, documents: dict[str, str]) -> None:
        self._db.execute("BEGIN")
        self._db.execute(f"DELETE FROM {table} WHERE session = ?", (session_id,))
        self._db.executemany(
            f"INSERT INTO {table} (uri, session, body) VALUES (?, ?, ?)",
            [(uri, session_id, body) for uri, body in documents.items()],
        )
        self._db.execute("COMMIT")


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning(
            "exchange index sync failed (the lexical leg ranks the semantic pool meanwhile): %s",
            task.exception(),
        )
