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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from sqlalchemy import ARRAY, and_, any_, bindparam, select
from sqlalchemy.engine import Row, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Select

from store.errors import SessionNotFound
from store.sql import dialect
from store.sql.mapping import message_columns
from store.sql.projection.cache import CachedView, SessionCache, session_key
from store.sql.projection.views import SqlSource, read_view
from store.sql.schema import GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import KEYS, read_session
from store.sql.statements import CHUNK
from strategies.view import InMemorySource, View

__all__ = ["Opened", "open_view"]

_Part = Literal["groups", "messages"]

_NO_SOURCE = InMemorySource({})
"""The source of a view made only to tell which groups it sends."""

_SESSION_WIDTH = len(SESSIONS.c)
_GROUP_LABELS = tuple((f"g_{c.key}", c.key) for c in GROUPS.c)
_GROUP_COLUMNS = tuple(c.key for c in GROUPS.c)


def _among(column: Any, arrays: bool) -> Any:
    if arrays:
        return column == any_(bindparam("ids", type_=ARRAY(column.type)))
    return column.in_(bindparam("ids", expanding=True))


@cache
def _session_and(part: _Part, arrays: bool) -> Select[Any]:
    """The session row (its columns first, by their names), left-joined to the active
    groups ``ids`` or to the messages of the groups ``ids`` (their columns after it)."""
    table = GROUPS if part == "groups" else MESSAGES
    on = [
        table.c.tenant == SESSIONS.c.tenant,
        table.c.session_id == SESSIONS.c.session_id,
        _among(table.c.group_id, arrays),
    ]
    if part == "groups":
        on.append(GROUPS.c.excluded.is_(False))
        columns = [c.label(label) for (label, _), c in zip(_GROUP_LABELS, GROUPS.c, strict=True)]
    else:
        columns = [c.label(f"m_{c.key}") for c in message_columns()]
    joined = SESSIONS.outerjoin(table, and_(*on))
    return select(SESSIONS, *columns).select_from(joined).where(*KEYS)


@dataclass(frozen=True, slots=True)
class _Known:
    """What to read with the session row, if the cache entry is still current."""

    part: _Part | None = None
    ids: Sequence[str] = ()
    sends_held: bool = False
    """The entry's view is complete and, with the messages read, holds every group it
    sends (no prefetch needed)."""


def _known(
    guess: CachedView | None, *, send: bool, view_of: Callable[[CachedView], View]
) -> _Known:
    """What the ``guess`` entry lacks: its dirty groups' rows, else (with ``send``) the
    messages of the groups its view sends."""
    if guess is None or guess.rows is None or guess.views is None:
        return _Known()
    if guess.dirty:
        return _Known("groups", sorted(guess.dirty))
    if not send or guess.excluded is None:
        return _Known()
    held = guess.messages
    missing = [g.group_id for g in view_of(guess).sendable() if g.group_id not in held]
    return _Known("messages" if missing else None, missing, sends_held=True)


@dataclass(frozen=True, slots=True)
class Opened:
    """A session's row and active view, as one read saw them."""

    session: RowMapping
    source: SqlSource
    view: View
    rows: Sequence[Mapping[Any, Any]]
    """The active group rows the view was built from."""


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
    :class:`~store.errors.SessionNotFound` when the session does not exist.
    """
    guess = cache.peek(session_id) if cache is not None else None

    def view_of(entry: CachedView) -> View:
        return View(groups=tuple(entry.views or ()), source=_NO_SOURCE, **kwargs)

    known = _known(guess, send=send, view_of=view_of)
    part = known.part if len(known.ids) <= CHUNK else None
    found: list[Row[Any]] = []
    if part is None:
        session = await read_session(conn, tenant, session_id)
    else:
        query = _session_and(part, dialect.of(conn).array_parameters)
        params = {"tenant": tenant, "session_id": session_id, "ids": list(known.ids)}
        found = list((await conn.execute(query, params)).all())
        if not found:
            raise SessionNotFound(session_id, tenant=tenant)
        session = found[0]._mapping
    check(session)
    entry = cache.entry(session_id, session_key(session)) if cache is not None else None
    source = SqlSource(engine, tenant, session_id, cache, entry)
    fresh: list[Mapping[str, Any]] | None = None
    current = entry is not None and entry is guess
    if current and part == "groups":
        group_id = _SESSION_WIDTH + _GROUP_COLUMNS.index("group_id")
        fresh = [
            dict(zip(_GROUP_COLUMNS, row[_SESSION_WIDTH:], strict=True))
            for row in found
            if row[group_id] is not None
        ]
    elif current and entry is not None and part == "messages":
        parts = [row[_SESSION_WIDTH:] for row in found if row[_SESSION_WIDTH] is not None]
        source.keep(known.ids, parts, key=entry.key)
    view, rows = await read_view(conn, source, session, fresh=fresh, **kwargs)
    if send and not (current and known.sends_held and (part is not None or not known.ids)):
        await source.prefetch(conn, [g.group_id for g in view.sendable()])
    return Opened(session, source, view, rows)
