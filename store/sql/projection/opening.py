"""Opening a session's active view: its row and what the cache lacks, in one statement.

Every view reads the session row first, to check the cache entry's key against it
(:mod:`store.sql.projection.cache`). What it reads next is usually known before that
read: after this store's own append, the group rows the append changed (the entry's
dirty groups); before a projection, the messages of the groups the cached view sends
that the entry does not hold (a turn's new groups). :func:`open_view` reads those with
the session row, in one statement (the row joined to them), and uses them only when the
row's key is the entry's, as a separate read after the key check would. Otherwise, or
when nothing is known to be missing, it reads as :func:`~store.sql.projection.views.read_view`
and :meth:`~store.sql.projection.views.SqlSource.prefetch` do. Both parts come from one
statement, so they are one snapshot on every database.

When the row's key is not the entry's (another writer wrote), the reads that follow make
one snapshot (a read transaction; on PostgreSQL a ``REPEATABLE READ`` one, see
:func:`~store.sql.drivers.engine.hold_snapshot`), so that what they load is cached at
the row's key. If every write since the entry's rows were read was of the session's
write chain, the row is read again joined to the group rows written since (their
``written_revision``), and the entry is caught up with them
(:meth:`~store.sql.projection.cache.SessionCache.catch_up`): a writer sharing a session
reads what the others wrote, not every active group. A projection of a session whose
last view found it moved reads those group rows first, joined to the session row and to
the messages it lacks (the active written groups', and those of the groups the entry
sends without holding their messages: the store's own appends), in one statement and so
one snapshot without a transaction: one round trip where the cached view, caught up,
then holds every message it sends (a snapshot, a second statement and its end before,
four on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, NamedTuple

from sqlalchemy import and_, bindparam, false, select, union_all
from sqlalchemy.engine import Row, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import FromClause, Select

from store.errors import SessionNotFound
from store.sql import dialect
from store.sql.branches.rows import lineage_of
from store.sql.drivers.engine import begin_snapshot, hold_snapshot
from store.sql.mapping import message_columns
from store.sql.projection.cache import CachedView, SessionCache, session_key
from store.sql.projection.views import SqlSource, excluded_of, group_view, read_view
from store.sql.schema import GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import KEYS, read_session
from store.sql.statements import CHUNK, in_key_list, key_list
from strategies.view import InMemorySource, View

__all__ = ["Opened", "open_view"]

_Part = Literal["groups", "messages", "written", "written_messages"]

_NO_SOURCE = InMemorySource({})
"""The source of a view made only to tell which groups it sends."""

_SESSION_WIDTH = len(SESSIONS.c)
_GROUP_LABELS = tuple((f"g_{c.key}", c.key) for c in GROUPS.c)
_GROUP_COLUMNS = tuple(c.key for c in GROUPS.c)
_GROUP_ID = _SESSION_WIDTH + _GROUP_COLUMNS.index("group_id")
_GROUP_EXCLUDED = _SESSION_WIDTH + _GROUP_COLUMNS.index("excluded")
_MESSAGE_AT = _SESSION_WIDTH + len(_GROUP_COLUMNS)
"""Where a message's columns begin in a row of the session, a group and its messages."""


def _keys_of(table: FromClause) -> tuple[Any, Any]:
    """The session key of the statements here, on ``table``'s columns."""
    return (
        table.c.tenant == bindparam("tenant"),
        table.c.session_id == bindparam("session_id"),
    )


@cache
def _session_and(part: _Part, capabilities: dialect.Capabilities) -> Select[Any]:
    """The session row (its columns first, by their names), left-joined to the groups
    ``ids``, to the messages of the groups ``ids``, to the groups written after the
    revision ``since`` (their columns after it), or (``written_messages``) to those
    and the groups ``ids`` and then to the active ones' messages (their columns last),
    where the session's write chain reaches back to ``since``."""
    table = MESSAGES if part == "messages" else GROUPS
    on = [table.c.tenant == SESSIONS.c.tenant, table.c.session_id == SESSIONS.c.session_id]
    if part == "written":
        on.append(GROUPS.c.written_revision > bindparam("since"))
    elif part == "written_messages":  # and the groups ``ids``, whose messages the entry lacks
        # one list of ids from two index reads (by ``written_revision``, by the primary
        # key), then looked up by the primary key: an ``OR`` of the two made SQLite walk
        # every group of the session
        written, lacking = GROUPS.alias("written"), GROUPS.alias("lacking")
        ids = union_all(
            select(written.c.group_id).where(
                *_keys_of(written), written.c.written_revision > bindparam("since")
            ),
            select(lacking.c.group_id).where(
                *_keys_of(lacking), in_key_list(lacking.c.group_id, "ids", capabilities)
            ),
        )
        on.append(GROUPS.c.group_id.in_(ids))
    else:
        on.append(in_key_list(table.c.group_id, "ids", capabilities))
    group_columns = [c.label(label) for (label, _), c in zip(_GROUP_LABELS, GROUPS.c, strict=True)]
    message_labels = [c.label(f"m_{c.key}") for c in message_columns()]
    joined = SESSIONS.outerjoin(table, and_(*on))
    if part == "messages":
        return select(SESSIONS, *message_labels).select_from(joined).where(*KEYS)
    if part == "written_messages":
        # the active groups' messages, where the write chain reaches back to ``since``
        # (else the caller reads again, and a long history's messages would come for
        # nothing): by the messages' (tenant, session_id, group_id, seq) index
        s, g, m = SESSIONS.c, GROUPS.c, MESSAGES.c
        reaches = and_(
            s.branch.is_(None), s.chain_revision == s.revision, s.chain_since <= bindparam("since")
        )
        of_group = and_(
            m.tenant == g.tenant, m.session_id == g.session_id, m.group_id == g.group_id
        )
        joined = joined.outerjoin(MESSAGES, and_(of_group, g.excluded.is_(false()), reaches))
        return select(SESSIONS, *group_columns, *message_labels).select_from(joined).where(*KEYS)
    # every dirty group, excluded or not (the caller keeps the active ones): a test of
    # ``excluded`` here made SQLite walk all the session's active groups by their
    # index ``(tenant, session_id, excluded, ...)`` instead of looking the few ids up
    # by the primary key (0.25 against 0.03 ms at 300 active groups, growing with them)
    return select(SESSIONS, *group_columns).select_from(joined).where(*KEYS)


@dataclass(frozen=True, slots=True)
class _Known:
    """What to read with the session row, if the cache entry is still current."""

    part: _Part | None = None
    ids: Sequence[str] = ()
    sends_held: bool = False
    """The entry's view is complete and, with the messages read, holds every group it
    sends (no prefetch needed)."""
    alone: bool = False
    """The statement that reads the session row is the read's only one, if the entry is
    still current."""


def _known(
    guess: CachedView | None, *, send: bool, view_of: Callable[[CachedView], View]
) -> _Known:
    """What the ``guess`` entry lacks: its dirty groups' rows, else (with ``send``) the
    messages of the groups its view sends."""
    if guess is None or guess.rows is None or guess.views is None:
        return _Known()
    if guess.dirty:
        ids = sorted(guess.dirty)
        return _Known("groups", ids, alone=not send) if len(ids) <= CHUNK else _Known()
    if guess.excluded is None:
        return _Known()
    if not send:
        return _Known(alone=True)
    held = guess.messages
    missing = [g.group_id for g in view_of(guess).sendable() if g.group_id not in held]
    fits = len(missing) <= CHUNK
    return _Known("messages" if missing and fits else None, missing, fits, alone=fits)


async def _read_session_and(
    conn: AsyncConnection, tenant: str, session_id: str, known: _Known
) -> tuple[RowMapping, list[Row[Any]]]:
    """The session row, and the rows of ``known`` read with it in one statement."""
    if known.part is None:
        return await read_session(conn, tenant, session_id), []
    capabilities = dialect.of(conn)
    query = _session_and(known.part, capabilities)
    ids = key_list(known.ids, capabilities)
    params = {"tenant": tenant, "session_id": session_id, "ids": ids}
    found = list((await conn.execute(query, params)).all())
    if not found:
        raise SessionNotFound(session_id, tenant=tenant)
    return found[0]._mapping, found


class _Written(NamedTuple):
    """The session row and what was written since a revision, read in one statement."""

    session: RowMapping
    groups: list[Mapping[str, Any]]
    """The rows of the groups written since (excluded ones too), and of the groups whose
    messages were asked for."""
    messages: list[Sequence[Any]]
    """With the messages asked for: the rows (of :func:`message_columns`) of those
    groups' and the written groups' messages, the active ones', where the session's
    write chain reaches back to the revision."""


async def _read_session_and_written(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    since: int,
    *,
    messages: Sequence[str] | None = None,
) -> _Written:
    """The session row, and the rows of the groups written after revision ``since``
    (excluded ones too), in one statement; with ``messages`` (group ids), the groups
    ``messages`` too, and the active ones' messages."""
    capabilities = dialect.of(conn)
    part: _Part = "written" if messages is None else "written_messages"
    query = _session_and(part, capabilities)
    params = {"tenant": tenant, "session_id": session_id, "since": since}
    if messages is not None:
        params["ids"] = key_list(messages, capabilities)
    found = list((await conn.execute(query, params)).all())
    if not found:
        raise SessionNotFound(session_id, tenant=tenant)
    groups: dict[str, Mapping[str, Any]] = {}
    for row in found:  # a group once, however many of its messages came with it
        group_id = row[_GROUP_ID]
        if group_id is not None and group_id not in groups:
            groups[group_id] = dict(
                zip(_GROUP_COLUMNS, row[_SESSION_WIDTH:_MESSAGE_AT], strict=True)
            )
    with_messages = messages is not None
    read = [row[_MESSAGE_AT:] for row in found if with_messages and row[_MESSAGE_AT] is not None]
    return _Written(found[0]._mapping, list(groups.values()), read)


def _catches_up(held: CachedView | None, session: RowMapping) -> bool:
    """Whether ``held`` can move to the ``session`` row's key by reading only the
    group rows written since its rows were known: the row's write chain (a root's)
    reaches its revision from there."""
    return (
        held is not None
        and held.rows is not None
        and held.views is not None
        and held.rows_at is not None
        and session["branch"] is None
        and held.key[0] == session["incarnation"]
        and session["chain_revision"] == session["revision"]
        and session["chain_since"] is not None
        and session["chain_since"] <= held.rows_at
    )


@dataclass(frozen=True, slots=True)
class Opened:
    """A session's row and active view, as one read saw them."""

    session: RowMapping
    source: SqlSource
    view: View
    rows: Sequence[Mapping[Any, Any]]
    """The active group rows the view was built from."""
    moved: bool = False
    """Whether the cache held the session at another key: another writer wrote it since
    this store last read or wrote it."""


def _entry(cache: SessionCache | None, session_id: str, session: RowMapping) -> CachedView | None:
    """The cache's entry for ``session`` as read, carrying the one it replaces when the
    session's write chain reaches the row (a root only: a fork reads through its
    lineage)."""
    if cache is None:
        return None
    chained = session["branch"] is None and session["chain_revision"] == session["revision"]
    since = session["chain_since"] if chained else None
    return cache.entry(session_id, session_key(session), since=since)


async def open_view(
    conn: AsyncConnection,
    engine: AsyncEngine,
    cache: SessionCache | None,
    tenant: str,
    session_id: str,
    *,
    check: Callable[[RowMapping], None],
    send: bool,
    **kwargs: Any,
) -> Opened:
    """The session's row and active view (``kwargs``: the view's tokenizer and policy).

    ``check`` sees the session row before anything else is done with it. With ``send``,
    the messages of the groups the projection sends are read too (into the cache entry).
    :class:`~store.errors.SessionNotFound` when the session does not exist. On a
    ``single`` read connection (:func:`~store.sql.drivers.engine.read_connection`) a read the
    cache entry says is one statement begins no transaction; when the entry turns out
    to have moved on, one is begun and the session row read again in it. Where the
    last view of the session found it moved (writers share it), the group rows written
    since the entry's are read with the session row first (:func:`_caught_up_first`).
    """
    guess = cache.peek(session_id) if cache is not None else None

    def view_of(entry: CachedView) -> View:
        return View(groups=tuple(entry.views or ()), source=_NO_SOURCE, **kwargs)

    known = _known(guess, send=send, view_of=view_of)
    caught, begun = None, False
    if cache is not None and guess is not None and cache.moving(session_id):
        caught, begun = await _caught_up_first(
            conn, engine, cache, tenant, session_id, guess, send=send, view_of=view_of
        )
    entry: CachedView | None
    found: list[Row[Any]]
    if caught is not None:
        session, entry = caught
        known, found, current = _Known(), [], True
    else:
        read = await _read_and_catch_up(conn, cache, tenant, session_id, guess, known, begun)
        session, found, entry, current, known = read
    check(session)
    lineage = None
    if session["branch"] is not None:  # a fork reads its groups' rows through its lineage
        lineage = await lineage_of(conn, tenant, session)
        if known.part == "messages":
            current = False  # the joined read saw its own rows only
    source = SqlSource(engine, tenant, session_id, cache, entry, lineage)
    fresh: list[Mapping[str, Any]] | None = None
    if current and known.part == "groups":
        fresh = [
            dict(zip(_GROUP_COLUMNS, row[_SESSION_WIDTH:], strict=True))
            for row in found
            if row[_GROUP_ID] is not None and not row[_GROUP_EXCLUDED]
        ]
    elif current and entry is not None and known.part == "messages":
        parts = [row[_SESSION_WIDTH:] for row in found if row[_SESSION_WIDTH] is not None]
        source.keep(known.ids, parts, key=entry.key)
    view, rows = await read_view(conn, source, session, fresh=fresh, **kwargs)
    if send and not (current and known.sends_held):
        await source.prefetch(conn, [g.group_id for g in view.sendable()])
    moved = guess is not None and guess.key != session_key(session)
    if cache is not None:
        cache.note_moved(session_id, moved)
        cache.note_session(session_id, session)
    return Opened(session, source, view, rows, moved)


async def _caught_up_first(
    conn: AsyncConnection,
    engine: AsyncEngine,
    cache: SessionCache,
    tenant: str,
    session_id: str,
    guess: CachedView,
    *,
    send: bool,
    view_of: Callable[[CachedView], View],
) -> tuple[tuple[RowMapping, CachedView] | None, bool]:
    """For a session the last view found moved by another writer (writers share it),
    the group rows written since ``guess``'s, read with the session row first, rather
    than after a read that finds it moved again: the session row and the entry caught
    up, and whether a snapshot was begun. With ``send`` the messages of the active
    groups written since come in the same statement, with those of the groups ``guess``
    sends and lacks (this store's own appends), and where the entry then holds every
    message its view sends that is all; otherwise the row is read again in one snapshot
    with the reads after it (the messages). None when the entry cannot catch up that
    way: read as usual (in that snapshot, if begun)."""
    if guess.rows is None or guess.views is None or guess.rows_at is None:
        return None, False
    sendable = view_of(guess).sendable() if send else []
    lacking = [g.group_id for g in sendable if g.group_id not in guess.messages]
    if send and len(lacking) <= CHUNK:
        session, caught, read = await _caught_up(
            conn, cache, tenant, session_id, guess, messages=lacking
        )
        if caught is not None:
            active = [row["group_id"] for row in read.groups if not row["excluded"]]
            SqlSource(engine, tenant, session_id, cache, caught).keep(
                active, read.messages, key=caught.key
            )
            if all(g.group_id in caught.messages for g in view_of(caught).sendable()):
                return (session, caught), False
            guess = caught
        # else the write chain does not reach back (a fork, a session made again, a
        # write off the chain): read again in a snapshot, as below, which finds so too
    began = send and (await begin_snapshot(conn) or await hold_snapshot(conn))
    session, caught, _ = await _caught_up(conn, cache, tenant, session_id, guess)
    return (None if caught is None else (session, caught)), began


async def _caught_up(
    conn: AsyncConnection,
    cache: SessionCache,
    tenant: str,
    session_id: str,
    guess: CachedView,
    *,
    messages: Sequence[str] | None = None,
) -> tuple[RowMapping, CachedView | None, _Written]:
    """The session row, read with the group rows written since ``guess``'s rows (one
    statement), and the entry caught up with them; None when the row's write chain does
    not reach back to ``guess``'s rows; and what was read (with ``messages``, group
    ids: their rows too, and the messages of those and the written ones, if active)."""
    assert guess.rows_at is not None
    read = await _read_session_and_written(
        conn, tenant, session_id, guess.rows_at, messages=messages
    )
    session = read.session
    if not _catches_up(guess, session):
        return session, None, read
    views = [(row, group_view(row)) for row in read.groups]
    key = session_key(session)
    caught = cache.catch_up(session_id, guess, key, views, excluded_of(session))
    return session, caught, read


class _Read(NamedTuple):
    """What :func:`_read_and_catch_up` read."""

    session: RowMapping
    found: list[Row[Any]]
    """The rows read with the session row (see :class:`_Known`)."""
    entry: CachedView | None
    current: bool
    """Whether :attr:`entry` holds the session at the row's key."""
    known: _Known
    """What the rows read with the session row are."""


async def _read_and_catch_up(
    conn: AsyncConnection,
    cache: SessionCache | None,
    tenant: str,
    session_id: str,
    guess: CachedView | None,
    known: _Known,
    begun: bool,
) -> _Read:
    """The session row, with what ``known`` says ``guess`` lacks; when the row shows the
    entry moved on, the reads again in one snapshot (caught up where the write chain
    reaches back). ``begun``: the reads are in one snapshot already."""
    if not known.alone and not begun:
        await begin_snapshot(conn)
    session, found = await _read_session_and(conn, tenant, session_id, known)
    entry = _entry(cache, session_id, session)
    current = entry is not None and entry is guess
    if not current and entry is not None and guess is not None:
        # the entry moved on (another writer wrote): the reads it needs now make one
        # snapshot with the row, so that what they load is cached at its key
        began = known.alone and not begun and await begin_snapshot(conn)
        began = await hold_snapshot(conn) or began
        if _catches_up(guess, session):
            # the rows written since the entry's, with the row: one statement
            assert cache is not None
            known, found = _Known(), []
            session, caught, _ = await _caught_up(conn, cache, tenant, session_id, guess)
            current = caught is not None
            entry = caught if caught is not None else _entry(cache, session_id, session)
        elif began:
            known = _Known()
            session, found = await _read_session_and(conn, tenant, session_id, known)
            entry = _entry(cache, session_id, session)
    return _Read(session, found, entry, current, known)
