"""Reading a session's history and the tenant's sessions (always filtered by tenant).

:func:`read_history` reads one page; :func:`stream_history` reads the session's row once
(:class:`~store.errors.SessionNotFound` when absent) and then keyset pages of
``page_size`` rows (``seq > last seen``), all on one connection. Each row is mapped to
its :class:`~store.models.StoredMessage` only when it is handed out, so a consumer that
does not keep the messages never holds a page of them at once. A corrupt row raises
:class:`~store.errors.CorruptRowError` when the iteration reaches it.

On SQLite a page of up to :data:`~store.contract.PAGE_SIZE` rows (the default) is read on
the event loop's own thread, as the projection reads its view
(:func:`~store.sql.drivers.sqlite.short_statements`: in WAL mode a read never waits for
a lock), not on aiosqlite's: a hand-off to that thread and back costs two thread
wake-ups, and on a loaded machine each wake-up waits for a core, so that a stream of
100,000 rows (200 pages) spent most of its time waiting for them. Reading a page holds
the loop about as long as mapping it does (2 to 3 ms for 500 rows). :func:`read_history`
reads such pages too, one after the other in one read transaction (one snapshot), and
lets the loop serve others between them; larger pages of a stream go to aiosqlite's
thread.

How long a stream's transaction stays open is a capability of the dialect
(:attr:`~store.sql.dialect.Capabilities.snapshot_reads`):

* SQLite: the whole iteration is one read transaction, so it sees one snapshot of the
  session. In WAL mode (which :mod:`store.sql.drivers.engine` sets) a reader never blocks
  writers; the cost of a slow consumer is only that checkpoints cannot pass the
  snapshot until the iteration ends.
* PostgreSQL: each page is read in its own short transaction, committed before the
  page's messages are handed out. A transaction left open while the caller works on the
  messages would hold back vacuum's horizon for the whole cluster, hold a lock that
  makes an ``ALTER TABLE`` (and every query queued behind it) wait, and could be ended
  by ``idle_in_transaction_session_timeout``. The connection stays checked out, idle,
  between pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import String, bindparam, func, select, type_coerce
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql import Select

from store.contract import PAGE_SIZE
from store.encryption.sealing import UnknownDataKey
from store.errors import InvalidInput
from store.models import SessionInfo, SessionOrder, StoredMessage
from store.rules.checks import check_page_size, check_session_id
from store.sql import dialect
from store.sql.branches.rows import Lineage, conversation, lineage_of
from store.sql.codec import sealed
from store.sql.dialect import kept_on
from store.sql.drivers.allocator import any_large, give_back
from store.sql.drivers.sqlite import rows_at_once, short_statements
from store.sql.errors import translate_errors
from store.sql.mapping import (
    COLUMN_INDEX,
    COLUMNS,
    message_columns,
    page_mapper,
    paused_collection,
    session_from_row,
)
from store.sql.schema import FIRST_SEQ, GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import SESSION_COLUMNS, read_session
from store.sql.statements import chunks

if TYPE_CHECKING:
    from store.encryption.sealing import Sealing

__all__ = [
    "history_query",
    "read_history",
    "read_page_rows",
    "read_sessions",
    "stream_history",
]

_SEQ = COLUMN_INDEX["seq"]
_CONTENTS = COLUMN_INDEX["contents"]


def history_query(
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    limit: int | None,
    before: int | None,
    after: int | None,
) -> Select[Any]:
    """The query for one page of a session's history, by ``seq``."""
    query = select(*message_columns()).where(
        MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id
    )
    if not include_excluded:
        query = query.where(MESSAGES.c.excluded.is_(False))
    if after is not None:
        query = query.where(MESSAGES.c.seq > after)
    if before is not None:
        query = query.where(MESSAGES.c.seq < before)
        if limit is not None:
            # the newest ``limit`` messages before ``before``, returned oldest first
            return query.order_by(MESSAGES.c.seq.desc()).limit(limit)
    query = query.order_by(MESSAGES.c.seq)
    if limit is not None:
        query = query.limit(limit)
    return query


async def group_kinds(
    conn: AsyncConnection, tenant: str, session_id: str, group_ids: Iterable[str]
) -> dict[str, str]:
    """The kind of each of ``group_ids`` (looked up by primary key, never by a join)."""
    kinds: dict[str, str] = {}
    for part in chunks(sorted(group_ids)):
        query = select(GROUPS.c.group_id, GROUPS.c.kind).where(
            GROUPS.c.tenant == tenant,
            GROUPS.c.session_id == session_id,
            GROUPS.c.group_id.in_(part),
        )
        kinds.update((row[0], row[1]) for row in await conn.execute(query))
    return kinds


async def branch_rows(
    conn: AsyncConnection,
    tenant: str,
    lineage: Lineage,
    *,
    include_excluded: bool,
    limit: int | None,
    before: int | None,
    after: int | None,
    newest: bool = False,
) -> list[Any]:
    """A page of a fork's conversation (:mod:`store.sql.branches.rows`) as
    :func:`history_query` pages a root's, each row ending with its group's kind (with
    ``newest``, the newest ``limit`` rows, newest first)."""

    def where(c: Mapping[str, Any]) -> list[Any]:
        conditions = []
        if not include_excluded:
            conditions.append(c["excluded"].is_(False))
        if after is not None:
            conditions.append(c["seq"] > after)
        if before is not None:
            conditions.append(c["seq"] < before)
        return conditions

    rows = conversation(tenant, lineage, where).subquery()
    query = select(*(rows.c[c.name] for c in COLUMNS), rows.c.group_kind)
    query = query.order_by(rows.c.seq.desc() if newest else rows.c.seq)
    if limit is not None:
        query = query.limit(limit)
    return list((await conn.execute(query)).all())


async def read_history(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool = False,
    limit: int | None = None,
    before: int | None = None,
    after: int | None = None,
    lineage: Lineage | None = None,
) -> list[StoredMessage]:
    """One page of history, oldest first, each row with its group's kind (a fork's
    through its ``lineage``, in one query).

    Where a read transaction is one snapshot (SQLite), the rows are read
    :data:`~store.contract.PAGE_SIZE` at a time on the event loop's thread, and each page
    is mapped before the next is read: what aiosqlite's thread fetches of a large text
    stays resident in its allocator arena after it is freed (``docs/limits.md``,
    "Memory"), and a page is as long a hold of the loop as mapping it. Elsewhere
    (PostgreSQL's read committed, where each statement sees the latest commit) in one
    query.
    """
    if lineage is not None:
        newest = before is not None and limit is not None
        rows = await branch_rows(
            conn,
            tenant,
            lineage,
            include_excluded=include_excluded,
            limit=limit,
            before=before,
            after=after,
            newest=newest,
        )
        if newest:
            rows.reverse()
        return _mapped(rows, tenant, session_id)
    if not dialect.of(conn).snapshot_reads:
        return await _one_query(
            conn,
            tenant,
            session_id,
            include_excluded=include_excluded,
            limit=limit,
            before=before,
            after=after,
        )
    if before is not None and limit is not None:
        return await _newest_pages(
            conn,
            tenant,
            session_id,
            include_excluded=include_excluded,
            limit=limit,
            before=before,
            after=after,
        )
    out: list[StoredMessage] = []
    remaining = limit
    while remaining is None or remaining > 0:
        size = PAGE_SIZE if remaining is None else min(PAGE_SIZE, remaining)
        with short_statements():
            page = list(
                await read_page_rows(
                    conn,
                    tenant,
                    session_id,
                    include_excluded=include_excluded,
                    after=after,
                    before=before,
                    limit=size,
                )
            )
        last = page[-1][_SEQ] if len(page) == size else None
        out += _mapped(page, tenant, session_id)
        if last is None:
            break
        after = last
        remaining = None if remaining is None else remaining - size
        await asyncio.sleep(0)  # the loop serves others between pages
    return out


async def _one_query(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    limit: int | None,
    before: int | None,
    after: int | None,
) -> list[StoredMessage]:
    """:func:`read_history` in one query."""
    query = history_query(
        tenant,
        session_id,
        include_excluded=include_excluded,
        limit=limit,
        before=before,
        after=after,
    ).add_columns(_kind_column())
    rows = list((await conn.execute(query)).all())
    if before is not None and limit is not None:
        rows.reverse()  # read newest first (see history_query)
    return _mapped(rows, tenant, session_id)


async def _newest_pages(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    limit: int,
    before: int,
    after: int | None,
) -> list[StoredMessage]:
    """:func:`read_history`'s newest ``limit`` messages before ``before``, read a page at
    a time from the newest on the event loop's thread, returned oldest first."""
    pages: list[list[StoredMessage]] = []
    remaining = limit
    while remaining > 0:
        size = min(PAGE_SIZE, remaining)
        query = history_query(
            tenant,
            session_id,
            include_excluded=include_excluded,
            limit=size,
            before=before,
            after=after,
        ).add_columns(_kind_column())
        with short_statements():
            rows = list((await conn.execute(query)).all())
        rows.reverse()  # read newest first (see history_query)
        first = rows[0][_SEQ] if len(rows) == size else None
        pages.append(_mapped(rows, tenant, session_id))
        if first is None:
            break
        before = first
        remaining -= size
        await asyncio.sleep(0)  # the loop serves others between pages
    return [message for page in reversed(pages) for message in page]


def _mapped(rows: list[Any], tenant: str, session_id: str) -> list[StoredMessage]:
    """The stored messages of history ``rows`` (each ending with its group's kind).

    When a row holds a large text, the allocator's free memory is given back before
    decoding (the read's buffers) and after it, once ``rows`` is emptied (the texts as
    read, and what decoding them freed): see :mod:`store.sql.drivers.allocator`."""
    large = any_large(map(itemgetter(_CONTENTS), rows))  # contents is read as text
    if large:
        give_back()
    mapped = page_mapper(tenant, session_id)
    with paused_collection():
        out = [mapped(row) for row in rows]
    if large:
        rows.clear()
        give_back()
    return out


def _kind_column() -> Any:
    """The kind of a message row's group: the row's own ``group_kind`` where it is
    stored, else the group's, looked up by its primary key (read as plain text, without
    the enum's per-row result processing: the mapping checks it)."""
    m, g = MESSAGES.c, GROUPS.c
    kind = (
        select(g.kind)
        .where(g.tenant == m.tenant, g.session_id == m.session_id, g.group_id == m.group_id)
        .scalar_subquery()
    )
    return type_coerce(func.coalesce(m.group_kind, kind), String()).label("group_kind")


@functools.cache
def _page_statement(include_excluded: bool, bounded: bool) -> Select[Any]:
    """One keyset page of a session's messages with each one's group kind (the group
    looked up by its primary key, row by row), built once per shape."""
    m = MESSAGES.c
    query = select(*message_columns(), _kind_column()).where(
        m.tenant == bindparam("tenant"),
        m.session_id == bindparam("session_id"),
        m.seq > bindparam("after"),
    )
    if not include_excluded:
        query = query.where(m.excluded.is_(False))
    if bounded:
        query = query.where(m.seq < bindparam("before"))
    return query.order_by(m.seq).limit(bindparam("limit"))


@dataclass(frozen=True, slots=True)
class _DriverPage:
    """A page statement compiled once for a dialect: its SQL and how to bind it."""

    sql: str
    names: tuple[str, ...]
    """The bound parameters, in the order the driver takes them."""
    fixed: dict[str, Any]
    """The values of the parameters the statement sets itself (an ``OFFSET`` of 0)."""

    def parameters(self, values: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(values[name] if name in values else self.fixed[name] for name in self.names)


def _driver_page(dialect: Dialect, include_excluded: bool, bounded: bool) -> _DriverPage:
    pages: dict[tuple[bool, bool], _DriverPage] = kept_on(dialect, "history_pages", dict)
    page = pages.get((include_excluded, bounded))
    if page is None:
        compiled = _page_statement(include_excluded, bounded).compile(dialect=dialect)
        names = tuple(compiled.positiontup or ())
        fixed = {name: compiled.binds[name].effective_value for name in names}
        page = pages[(include_excluded, bounded)] = _DriverPage(str(compiled), names, fixed)
    return page


async def read_page_rows(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    after: int | None,
    before: int | None,
    limit: int,
) -> Sequence[Any]:
    """A keyset page: the first ``limit`` rows between the exclusive ``seq`` bounds,
    oldest first, each ending with its group's kind (map the rows with
    :func:`~store.sql.mapping.page_mapper`; pass the last ``seq`` seen as ``after`` for
    the next page).

    The statement is compiled once per dialect and sent as the driver's own SQL: the
    rows are mapped from plain tuples, so SQLAlchemy's result processing is not needed
    (on SQLite inside :func:`~store.sql.drivers.sqlite.short_statements`, the driver's
    tuples are read directly: :func:`~store.sql.drivers.sqlite.rows_at_once`)."""
    values: dict[str, Any] = {
        "tenant": tenant,
        "session_id": session_id,
        "after": FIRST_SEQ - 1 if after is None else after,
        "limit": limit,
    }
    if before is not None:
        values["before"] = before
    page = _driver_page(conn.dialect, include_excluded, before is not None)
    parameters = page.parameters(values)
    rows = rows_at_once(conn, page.sql, parameters)
    if rows is None:
        rows = list((await conn.exec_driver_sql(page.sql, parameters)).all())
    return rows


async def read_sessions(
    conn: AsyncConnection,
    tenant: str,
    *,
    limit: int | None = None,
    after: str | None = None,
    updated_since: datetime | None = None,
    order: SessionOrder = "id",
) -> list[SessionInfo]:
    """Sessions of ``tenant`` after the ``after`` id, by id or newest update first.

    Both are keyset pages on an index (``(tenant, session_id)``, the primary key, or
    ``(tenant, updated_at, session_id)``), so a page costs O(page).
    """
    s = SESSIONS.c
    listed = s.branch.is_(None) | (s.branch == "fork")  # tails and kept rows are not
    query = select(*SESSION_COLUMNS).where(s.tenant == tenant, listed)
    if updated_since is not None:
        query = query.where(s.updated_at >= updated_since)
    if order == "id":
        if after is not None:
            query = query.where(s.session_id > after)
        query = query.order_by(s.session_id)
    else:
        if after is not None:
            last = (
                await conn.execute(
                    select(s.updated_at).where(s.tenant == tenant, s.session_id == after)
                )
            ).scalar_one_or_none()
            if last is None:
                raise InvalidInput(f"cannot page after session {after!r}: it does not exist")
            query = query.where(
                (s.updated_at < last) | ((s.updated_at == last) & (s.session_id < after))
            )
        query = query.order_by(s.updated_at.desc(), s.session_id.desc())
    if limit is not None:
        query = query.limit(limit)
    rows = (await conn.execute(query)).mappings().all()
    return [session_from_row(row) for row in rows]


async def stream_history(
    engine: AsyncEngine,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool = False,
    after: int | None = None,
    before: int | None = None,
    page_size: int = PAGE_SIZE,
    prepare: Callable[[], Awaitable[None]] | None = None,
    sealing: Sealing | None = None,
) -> AsyncGenerator[StoredMessage, None]:
    """The session's stored messages, oldest first, read ``page_size`` at a time.

    ``after`` and ``before`` are exclusive ``seq`` bounds; excluded messages are left
    out unless ``include_excluded``; ``prepare``, when given, is awaited before the
    first read (the store readies its connections); ``sealing`` opens the texts of an
    encrypted tenant (set around each page's read and mapping, never across a yield).
    Raises only
    :class:`~store.errors.ChatledgerError`:
    :class:`~store.errors.SessionNotFound` at the first step when the session is absent,
    :class:`~store.errors.CorruptRowError` at a row that does not validate.
    """
    check_session_id(session_id)
    check_page_size(page_size)
    if prepare is not None:
        await prepare()
    on_loop = short_statements if page_size <= PAGE_SIZE else contextlib.nullcontext
    with translate_errors():
        async with engine.connect() as conn:
            short_transactions = not dialect.of(conn).snapshot_reads
            with sealed(sealing):
                mapped = page_mapper(tenant, session_id)
            with on_loop(), sealed(sealing):
                session = await read_session(conn, tenant, session_id)
                lineage = None
                if session["branch"] is not None:
                    lineage = await lineage_of(conn, tenant, session)
            cursor = after
            while True:
                with on_loop(), sealed(sealing):  # never across a yield: see above
                    rows: Sequence[Any]
                    if lineage is not None:
                        rows = await branch_rows(
                            conn,
                            tenant,
                            lineage,
                            include_excluded=include_excluded,
                            after=cursor,
                            before=before,
                            limit=page_size,
                        )
                    else:
                        rows = await read_page_rows(
                            conn,
                            tenant,
                            session_id,
                            include_excluded=include_excluded,
                            after=cursor,
                            before=before,
                            limit=page_size,
                        )
                if short_transactions:
                    await conn.commit()
                for row in rows:  # a row that does not map raises where it is reached
                    try:
                        with sealed(sealing):
                            message = mapped(row)
                    except UnknownDataKey:  # a rotation made since: read the keys again
                        if sealing is None or sealing.reload is None:
                            raise
                        await sealing.reload()
                        with sealed(sealing):
                            message = mapped(row)
                    yield message
                if len(rows) < page_size:
                    return
                cursor = rows[-1][_SEQ]
