"""The projection's reads: a session's active view, its messages loaded by group id.

:func:`read_view` reads the active groups through the ``(tenant, session_id, excluded,
anchor, slot)`` index, so a view costs O(active groups); :class:`SqlSource` loads the
messages of the groups a strategy asks for (reductions applied), by group id. Both go
through the store's cache of active views (:mod:`store.sql.projection.cache`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Table, and_, bindparam, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Select

from store.encryption.sealing import UnknownDataKey
from store.sql import dialect
from store.sql.branches.rows import Lineage, group_read
from store.sql.codec import sealed, sealing_now
from store.sql.drivers.allocator import any_large, give_back
from store.sql.drivers.engine import read_connection
from store.sql.mapping import COLUMN_INDEX, message_columns, row_message
from store.sql.projection.cache import (
    CachedView,
    Key,
    Pairs,
    SessionCache,
    read_key,
    replaced,
    session_key,
)
from store.sql.schema import GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import KEYS
from store.sql.statements import chunks
from strategies.groups import in_call_order
from strategies.messages import Message
from strategies.view import GroupLinks, GroupView, Totals, View

if TYPE_CHECKING:
    from store.encryption.sealing import Sealing

_T = TypeVar("_T")

__all__ = [
    "SqlSource",
    "active_group_rows",
    "excluded_of",
    "excluded_totals",
    "group_view",
    "read_view",
]

_SEQ = COLUMN_INDEX["seq"]
_GROUP = COLUMN_INDEX["group_id"]
_CONTENTS = COLUMN_INDEX["contents"]


def group_view(row: Mapping[Any, Any]) -> GroupView:
    """The strategies' view of one group row."""
    summary_of = row["summary_of"]
    return GroupView(
        group_id=row["group_id"],
        kind=row["kind"],
        turn=row["turn"],
        anchor=row["anchor"],
        slot=row["slot"],
        message_count=row["message_count"],
        token_count=row["token_count"],
        pinned=row["pinned"],
        has_reasoning=row["has_reasoning"],
        pending_calls=row["pending_calls"],
        orphan=row["orphan"],
        summary_of=tuple(summary_of or ()),
    )


_ACTIVE_GROUPS = (
    select(GROUPS)
    .where(
        GROUPS.c.tenant == bindparam("tenant"),
        GROUPS.c.session_id == bindparam("session_id"),
        GROUPS.c.excluded.is_(False),
    )
    .order_by(GROUPS.c.anchor, GROUPS.c.slot)
)
_GROUPS_BY_ID = select(GROUPS).where(
    GROUPS.c.tenant == bindparam("tenant"),
    GROUPS.c.session_id == bindparam("session_id"),
    GROUPS.c.group_id.in_(bindparam("ids", expanding=True)),
    GROUPS.c.excluded.is_(False),
)
_TOTALS_AND_KEY = (
    SESSIONS.c.stored_messages - SESSIONS.c.active_messages,
    SESSIONS.c.stored_groups - SESSIONS.c.active_groups,
    SESSIONS.c.stored_tokens - SESSIONS.c.active_tokens,
    SESSIONS.c.incarnation,
    SESSIONS.c.revision,
)
_EXCLUDED_TOTALS = select(*_TOTALS_AND_KEY).where(*KEYS)
_SESSION_PART = tuple(f"session_{name}" for name in ("messages", "groups", "tokens", "inc", "rev"))
"""Labels of the session's excluded totals and key added to a group read."""


def _with_session(query: Select[Any], table: Table, columns: Sequence[Any]) -> Select[Any]:
    """``query`` of ``table`` joined to its session's row, with ``columns`` of it added:
    the session as the same statement saw it (no further bound parameter)."""
    joined = table.join(
        SESSIONS,
        and_(SESSIONS.c.tenant == table.c.tenant, SESSIONS.c.session_id == table.c.session_id),
    )
    return query.add_columns(*columns).select_from(joined)


_ACTIVE_GROUPS_KEYED = _with_session(
    _ACTIVE_GROUPS,
    GROUPS,
    [c.label(n) for c, n in zip(_TOTALS_AND_KEY, _SESSION_PART, strict=True)],
)
_GROUPS_BY_ID_KEYED = _with_session(
    _GROUPS_BY_ID,
    GROUPS,
    [c.label(n) for c, n in zip(_TOTALS_AND_KEY, _SESSION_PART, strict=True)],
)
"""The group reads with the session's excluded totals and cache key as the same
statement saw them, where each statement sees the latest commit (PostgreSQL): one
statement rather than the group read and then :data:`_EXCLUDED_TOTALS`."""
_MESSAGES_BY_GROUP = select(*message_columns()).where(
    MESSAGES.c.tenant == bindparam("tenant"),
    MESSAGES.c.session_id == bindparam("session_id"),
    MESSAGES.c.group_id.in_(bindparam("ids", expanding=True)),
)
_MESSAGES_AND_KEY = _with_session(
    _MESSAGES_BY_GROUP, MESSAGES, [SESSIONS.c.incarnation, SESSIONS.c.revision]
)
"""The messages with the session's cache key as the same statement saw it (one
snapshot): where each statement sees the latest commit, the key read with the rows
rather than by a second statement after them."""


async def active_group_rows(
    conn: AsyncConnection, tenant: str, session_id: str, seen: _Seen | None = None
) -> list[RowMapping]:
    """The session's active group rows in projection order (with ``seen``, the session's
    excluded totals and key as the statement saw them are added to it)."""
    params = {"tenant": tenant, "session_id": session_id}
    query = _ACTIVE_GROUPS if seen is None else _ACTIVE_GROUPS_KEYED
    rows = list((await conn.execute(query, params)).mappings().all())
    if seen is not None:
        seen.saw(rows)
    return rows


class _Seen:
    """The session's excluded totals and key as each group read saw them."""

    __slots__ = ("parts", "unknown")

    def __init__(self) -> None:
        self.parts: set[tuple[Any, ...]] = set()
        self.unknown = False
        """A read returned no row to tell them by."""

    def saw(self, rows: Sequence[Mapping[Any, Any]]) -> None:
        if not rows:
            self.unknown = True
        self.parts.update(tuple(row[label] for label in _SESSION_PART) for row in rows)

    def agreed(self) -> tuple[Totals, Key | None] | None:
        """What every read saw, when they all saw the same (else None: read it again)."""
        if self.unknown or len(self.parts) != 1:
            return None
        messages, groups, tokens, inc, rev = next(iter(self.parts))
        if inc is None:  # the session is gone
            return Totals(), None
        return Totals(messages=int(messages), groups=int(groups), tokens=int(tokens)), (inc, rev)


async def excluded_totals(
    conn: AsyncConnection, tenant: str, session_id: str
) -> tuple[Totals, Key | None]:
    """Messages, groups and tokens of the excluded groups, and the session's cache key.

    The totals come from the session's aggregates, kept current on every write, so this
    is one primary-key read however much of the history is excluded.
    """
    params = {"tenant": tenant, "session_id": session_id}
    row = (await conn.execute(_EXCLUDED_TOTALS, params)).one_or_none()
    if row is None:
        return Totals(), None
    messages, groups, tokens, incarnation, revision = row
    totals = Totals(messages=int(messages), groups=int(groups), tokens=int(tokens))
    return totals, (incarnation, revision)


@dataclass(frozen=True)
class SqlSource:
    """Loads groups' messages from SQL by group id, reductions applied.

    With a cache entry, groups it holds are served from it, and groups read from SQL are
    added to it when the session is still at the entry's key after the read.
    """

    engine: AsyncEngine
    tenant: str
    session_id: str
    cache: SessionCache | None = None
    entry: CachedView | None = None
    lineage: Lineage | None = None
    """A fork's lineage: its groups' messages are read through it
    (:mod:`store.sql.branches.rows`); None for a root."""
    sealing: Sealing | None = field(default_factory=sealing_now)
    """The sealing of the call that made the source (its loads run later, outside it)."""

    async def load_rows(self, group_ids: Sequence[str]) -> dict[str, list[tuple[int, Message]]]:
        """Each group's ``(seq, message)`` pairs in ``seq`` order (a joined early result
        after its call: :func:`~strategies.groups.in_call_order`)."""
        held = self.entry.messages if self.entry is not None else {}
        out = {gid: list(held.get(gid, ())) for gid in group_ids}
        missing = sorted({gid for gid in group_ids if gid not in held})
        if missing:
            async with read_connection(self.engine) as conn:
                out.update(await self._opened(lambda: self._read(conn, missing)))
        return out

    async def _opened(self, read: Callable[[], Awaitable[_T]]) -> _T:
        """``read()`` (a read of rows) with the source's sealing; once more after the
        tenant's keys are read again when a text names a data key this process has not
        read (a rotation another process made)."""
        with sealed(self.sealing):
            try:
                return await read()
            except UnknownDataKey:
                if self.sealing is None or self.sealing.reload is None:
                    raise
        await self.sealing.reload()
        with sealed(self.sealing):
            return await read()

    async def prefetch(self, conn: AsyncConnection, group_ids: Sequence[str]) -> None:
        """Read the groups the cache entry lacks on ``conn``, into the entry.

        ``conn`` must be the connection the entry's key was checked on (on SQLite its
        read transaction is one snapshot, so the key needs no second read).
        """
        if self.entry is not None:
            missing = sorted({gid for gid in group_ids if gid not in self.entry.messages})
            if missing:
                snapshot = dialect.of(conn).snapshot_reads
                key = self.entry.key if snapshot else None
                await self._opened(lambda: self._read(conn, missing, key=key))

    async def _read(
        self, conn: AsyncConnection, group_ids: Sequence[str], *, key: Key | None = None
    ) -> dict[str, list[tuple[int, Message]]]:
        """Read ``group_ids`` from SQL; add them to the entry if the key still matches.

        ``key`` is the session's key as ``conn`` sees it, when known; else it is read.
        """
        params = {"tenant": self.tenant, "session_id": self.session_id}
        caching = self.cache is not None and self.entry is not None
        keyed = caching and key is None  # each statement tells the key it saw
        if self.lineage is not None:
            return await self._read_branch(conn, group_ids, key=key, keyed=keyed)
        query = _MESSAGES_AND_KEY if keyed else _MESSAGES_BY_GROUP
        seen: set[Key | None] = set()
        found: list[Sequence[Any]] = []
        for part in chunks(group_ids):
            rows = (await conn.execute(query, {**params, "ids": part})).all()
            found.extend(rows)
            if keyed:
                seen.update((row[-2], row[-1]) for row in rows)
                if not rows:  # nothing to tell the key by
                    seen.add(await read_key(conn, self.tenant, self.session_id))
        if keyed:
            key = seen.pop() if len(seen) == 1 else None
        return self.keep(group_ids, found, key=key)

    async def _read_branch(
        self, conn: AsyncConnection, group_ids: Sequence[str], *, key: Key | None, keyed: bool
    ) -> dict[str, list[tuple[int, Message]]]:
        """:meth:`_read` of a fork: its conversation's rows of ``group_ids``, each
        statement with the session's key as it saw it."""
        assert self.lineage is not None
        width = len(COLUMN_INDEX)
        seen: set[Key | None] = set()
        found: list[Sequence[Any]] = []
        for part in chunks(group_ids):
            query, params = group_read(self.tenant, self.lineage, part, keyed=keyed)
            rows = (await conn.execute(query, params)).all()
            found.extend(row[:width] for row in rows)
            if keyed:
                seen.update((row[-2], row[-1]) for row in rows)
                if not rows:
                    seen.add(await read_key(conn, self.tenant, self.session_id))
        if keyed:
            key = seen.pop() if len(seen) == 1 else None
        return self.keep(group_ids, found, key=key)

    def keep(
        self, group_ids: Sequence[str], rows: Sequence[Sequence[Any]], *, key: Key | None
    ) -> dict[str, list[tuple[int, Message]]]:
        """The messages of ``group_ids`` from their ``rows`` (of :func:`message_columns`),
        added to the entry when ``key``, the session's key as the rows were read (None:
        unknown), is the entry's."""
        loaded: dict[str, list[tuple[int, Message]]] = {gid: [] for gid in group_ids}
        if any_large(map(itemgetter(_CONTENTS), rows)):  # contents is read as text
            give_back()  # see store.sql.drivers.allocator: the read's buffers, before decoding
        for row in rows:
            shown = row_message(row, tenant=self.tenant, session_id=self.session_id)
            loaded[row[_GROUP]].append((row[_SEQ], shown))
        for gid, pairs in loaded.items():
            pairs.sort(key=_seq_of)
            loaded[gid] = in_call_order(pairs, _message_of)
        entry = self.entry
        if self.cache is not None and entry is not None and key is not None and key == entry.key:
            frozen: dict[str, Pairs] = {gid: tuple(p) for gid, p in loaded.items()}
            self.cache.add_messages(self.session_id, entry, frozen)
        return loaded

    def links(self, group_id: str) -> GroupLinks | None:
        """How the cached messages of ``group_id`` pair (made once per cached group)."""
        entry = self.entry
        if entry is None:
            return None
        links = entry.links.get(group_id)
        if links is None:
            shown = entry.shown.get(group_id)
            if shown is None:
                return None
            links = entry.links[group_id] = GroupLinks.of(shown)
        return links

    def held(self, group_ids: Sequence[str]) -> list[tuple[Sequence[Message], GroupLinks]] | None:
        """The cached messages and links of each of ``group_ids``, in order (None: the
        entry does not hold them all); the links are made once per cached group."""
        entry = self.entry
        if entry is None:
            return None
        shown, links = entry.shown, entry.links
        out: list[tuple[Sequence[Message], GroupLinks]] = []
        for group_id in group_ids:
            messages = shown.get(group_id)
            if messages is None:
                return None
            linked = links.get(group_id)
            if linked is None:
                linked = links[group_id] = GroupLinks.of(messages)
            out.append((messages, linked))
        return out

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        """The messages of each group (reductions applied)."""
        if self.entry is not None:
            shown = self.entry.shown
            if all(gid in shown for gid in group_ids):
                return {gid: list(shown[gid]) for gid in group_ids}
        rows = await self.load_rows(group_ids)
        return {gid: [pair[1] for pair in rows[gid]] for gid in group_ids}


def excluded_of(session: Mapping[Any, Any]) -> Totals:
    """The excluded totals in the session's aggregates."""
    return Totals(
        messages=int(session["stored_messages"] - session["active_messages"]),
        groups=int(session["stored_groups"] - session["active_groups"]),
        tokens=int(session["stored_tokens"] - session["active_tokens"]),
    )


def _seq_of(pair: tuple[int, Message]) -> int:
    return pair[0]


def _message_of(pair: tuple[int, Message]) -> Message:
    return pair[1]


async def read_view(
    conn: AsyncConnection,
    source: SqlSource,
    session: RowMapping,
    *,
    fresh: Sequence[Mapping[Any, Any]] | None = None,
    **kwargs: Any,
) -> tuple[View, Sequence[Mapping[Any, Any]]]:
    """The active view of ``source``'s session and the group rows it was built from.

    ``session`` is the session's row as read on ``conn``. The rows come from
    ``source``'s cache entry when it holds them (reading again only the groups the
    store's own append changed, unless ``fresh`` holds them: those of the entry's dirty
    groups that are active, read in the statement that read ``session``); rows read
    from SQL are recorded in it when the session row read after them still has the
    entry's key. On SQLite the transaction reads one snapshot, so ``session`` is that
    row: its aggregates give the excluded totals.
    """
    entry = source.entry
    if (
        entry is not None
        and entry.views is not None
        and entry.excluded is not None
        and not entry.dirty
    ):
        rows, views, excluded = entry.rows or (), entry.views, entry.excluded
    elif (
        fresh is not None
        and entry is not None
        and entry.rows is not None
        and entry.views is not None
    ):
        rows, views = _placed(entry.rows, entry.views, entry.dirty, fresh)
        excluded = excluded_of(session)
        if source.cache is not None:
            source.cache.set_rows(source.session_id, entry, rows, views, excluded)
    else:
        snapshot = dialect.of(conn).snapshot_reads
        seen = None if snapshot else _Seen()
        if entry is not None and entry.rows is not None and entry.views is not None:
            rows, views = await _refreshed(conn, source, entry.rows, entry.views, entry.dirty, seen)
        else:
            rows = await active_group_rows(conn, source.tenant, source.session_id, seen)
            views = [group_view(r) for r in rows]
        key: Key | None
        if seen is None:
            excluded, key = excluded_of(session), session_key(session)
        else:
            agreed = seen.agreed()
            if agreed is None:
                agreed = await excluded_totals(conn, source.tenant, source.session_id)
            excluded, key = agreed
        if source.cache is not None and entry is not None and key == entry.key:
            source.cache.set_rows(source.session_id, entry, rows, views, excluded)
    view = View(groups=tuple(views), source=source, excluded=excluded, **kwargs)
    return view, rows


async def _refreshed(
    conn: AsyncConnection,
    source: SqlSource,
    rows: Sequence[Mapping[Any, Any]],
    views: Sequence[GroupView],
    dirty: frozenset[str],
    seen: _Seen | None = None,
) -> tuple[list[Mapping[Any, Any]], list[GroupView]]:
    """``rows`` and ``views`` with the ``dirty`` groups read again, in projection order
    (with ``seen``, as :func:`active_group_rows`)."""
    params = {"tenant": source.tenant, "session_id": source.session_id}
    fresh: list[Mapping[Any, Any]] = []
    query = _GROUPS_BY_ID if seen is None else _GROUPS_BY_ID_KEYED
    for part in chunks(sorted(dirty)):
        found = list((await conn.execute(query, {**params, "ids": list(part)})).mappings())
        if seen is not None:
            seen.saw(found)
        fresh.extend(found)
    if seen is not None and not dirty:
        seen.unknown = True
    return _placed(rows, views, dirty, fresh)


def _placed(
    rows: Sequence[Mapping[Any, Any]],
    views: Sequence[GroupView],
    dirty: frozenset[str],
    fresh: Sequence[Mapping[Any, Any]],
) -> tuple[list[Mapping[Any, Any]], list[GroupView]]:
    """``rows`` and ``views`` with the ``dirty`` groups' replaced by the ``fresh`` rows
    (the active ones among them), in projection order."""
    placed_rows, placed_views = replaced(rows, views, dirty, [(r, group_view(r)) for r in fresh])
    return list(placed_rows), list(placed_views)
