"""SQLite through aiosqlite, with statements that cannot wait run on the caller's thread.

aiosqlite runs each call on the connection's own thread, so that a call that waits
(for another connection's write lock, up to the busy timeout) does not block the event
loop. SQLAlchemy's adapter makes four such calls for a ``SELECT`` (open a cursor,
execute, fetch, close) and three for other statements, and on a virtual machine each
hand-off costs two thread wake-ups: together they were most of a turn's time (about
0.5 ms a statement where the driver call itself takes 0.03 ms).

This adapter runs the whole statement, fetch and close as one call. Inside
:func:`short_statements` (the store's per-turn operations: append, compaction, context
and view, whose statements touch a few rows each), a statement that cannot wait for a
lock runs on the event loop's own thread (:func:`_runs_inline`):

- in WAL mode (which the store sets up) reads do not wait for writers, so ``BEGIN``
  (deferred), ``SELECT`` and ``ROLLBACK`` run inline (the exception, a reader meeting
  WAL recovery, would wait up to the busy timeout on the loop's thread);
- ``INSERT``, ``UPDATE`` and ``DELETE`` run inline only inside ``BEGIN IMMEDIATE``,
  once the connection holds the write lock, and only up to :data:`INLINE_ROWS`
  parameter sets. That covers the slices of a large append (250 rows a statement,
  about 1 to 3 ms of SQLite for messages of 1 kB, less than building them): on
  aiosqlite's thread they made a third thread compete for the interpreter lock with
  the loop and the token-counting thread (binding each row takes the lock, each step
  releases it), and a 10k-message import ran 13% slower;
- ``BEGIN IMMEDIATE`` is first tried inline with the busy timeout at zero, which
  takes the write lock at once when no other connection holds it (the common case, and
  the one a turn's latency is made of); only when the lock is taken does it go to
  aiosqlite's thread, to wait there for the lock with the connection's own timeout;
- ``COMMIT`` runs inline: in WAL mode it never waits for a lock (the automatic
  checkpoint it may start, every 1,000 WAL pages, is a passive one, which skips what
  it cannot take), so the loop's thread pays at most that checkpoint's writes, now and
  then, instead of two thread hand-offs on every write;
- ``PRAGMA``, DDL and everything else go to aiosqlite's thread, one call each, through
  aiosqlite's ``Connection._execute`` (the function behind all of aiosqlite's own
  methods).

Outside :func:`short_statements` (full history reads, imports, audits, which may read
a whole session) every statement goes to aiosqlite's thread, so that the loop keeps
serving other tasks meanwhile.

Without WAL (an in-memory database, or a file system that refuses it) everything goes
to aiosqlite's thread. Errors, connection set-up and the rest are SQLAlchemy's
aiosqlite adapter, unchanged.
"""

from __future__ import annotations

import collections
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

import aiosqlite
from sqlalchemy import CompoundSelect, Delete, Insert, Select, Update
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.pool import QueuePool
from sqlalchemy.sql.base import Executable
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_, in_greenlet

from store.sql.drivers.prepared import (
    PreparedEngine,
    PreparedResult,
    listened,
    parameter_sets,
    prepare,
)

__all__ = [
    "INLINE_ROWS",
    "WRITE_OPTION",
    "InlineAsyncConnection",
    "InlineAsyncEngine",
    "OneHopAiosqliteDBAPI",
    "rows_at_once",
    "short_statements",
]

Outcome = tuple[Any, list[Any] | None, int, int | None]
"""A statement's description, rows (None without a result), rowcount and lastrowid."""

WRITE_OPTION = "chatledger_write"
"""Connection execution option that makes SQLite begin with ``BEGIN IMMEDIATE``."""

INLINE_ROWS = 256
"""The most parameter sets of a write run on the caller's thread (an append's row
builder sends at most 250 a statement)."""

_READS = ("SELECT", "BEGIN", "ROLLBACK")
_BUSY = getattr(sqlite3, "SQLITE_BUSY", 5)
_JOURNAL_MODE = re.compile(r"\s*PRAGMA\s+(main\.)?journal_mode\b", re.IGNORECASE)
_WRITES = ("INSERT", "UPDATE", "DELETE")


def _run(conn: sqlite3.Connection, operation: str, parameters: Any, many: bool) -> Outcome:
    """Execute on aiosqlite's thread: cursor, statement, fetch and close in one call."""
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else None
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


def _run_handed(
    conn: sqlite3.Connection, operation: str, handed: list[Any], many: bool
) -> list[Outcome]:
    """:func:`_run` on aiosqlite's thread, its parameters and its outcome each handed
    over in a list that the receiver empties: the thread's loop holds the last call it
    ran (arguments and result) until its next one, which would keep a tool result of
    many megabytes, bound or fetched, in memory for as long."""
    return [_run(conn, operation, handed.pop(), many)]


_SHORT: ContextVar[bool] = ContextVar("chatledger_sqlite_short", default=False)


@contextmanager
def short_statements() -> Iterator[None]:
    """Within this block (and the tasks it starts), statements that cannot wait for a
    lock run on the caller's thread: use it only around statements that touch a few
    rows."""
    token = _SHORT.set(True)
    try:
        yield
    finally:
        _SHORT.reset(token)


def _verb(operation: str) -> str:
    return operation.lstrip()[:8].upper()


def _runs_inline(operation: str, parameters: Any, many: bool, holds_write_lock: bool) -> bool:
    """Whether the statement cannot wait for a lock (the connection being in WAL mode)."""
    verb = _verb(operation)
    if verb.startswith(_READS):
        return not verb.startswith("BEGIN") or "IMMEDIATE" not in operation.upper()
    if verb.startswith(_WRITES) and holds_write_lock:
        return not many or len(parameters) <= INLINE_ROWS
    return False


def _is_begin_immediate(operation: str) -> bool:
    return _verb(operation).startswith("BEGIN") and "IMMEDIATE" in operation.upper()


def _begin_at_once(conn: sqlite3.Connection, wait_ms: int) -> bool:
    """``BEGIN IMMEDIATE`` if the write lock is free now (True), without waiting for it
    (False: another connection holds it); the busy timeout is ``wait_ms`` again after."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if getattr(error, "sqlite_errorcode", _BUSY) & 0xFF != _BUSY:
            raise
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
    return True


class _OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    """A client-side cursor whose statements each take one call on aiosqlite's thread."""

    __slots__ = ("_outcome",)

    def __init__(self, adapt_connection: Any) -> None:
        # no driver cursor is opened here: each statement opens and closes its own
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._outcome: Outcome = (None, None, -1, None)

    @property
    def description(self) -> Any:
        return self._outcome[0]

    @property
    def rowcount(self) -> int:
        return self._outcome[2]

    @property
    def lastrowid(self) -> Any:
        return self._outcome[3]

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    async def _async_soft_close(self) -> None:
        return None

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        if not self._here(operation, parameters, False):
            super().execute(operation, parameters)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        if not self._here(operation, seq_of_parameters, True):
            super().executemany(operation, seq_of_parameters)

    def _here(self, operation: str, parameters: Any, many: bool) -> bool:
        """Run a statement that cannot wait right here, when called outside a greenlet
        (by :class:`InlineAsyncConnection`, which made sure it cannot wait); False
        inside one: SQLAlchemy's ``execute`` insists on an ``await``, so the statement
        goes to :meth:`_call` (still on the loop's thread when it cannot wait)."""
        if in_greenlet():
            return False
        adapt = cast(_OneHopConnection, self._adapt_connection)
        if _runs_inline(operation, parameters, many, adapt.holds_write_lock):
            try:
                outcome = _run(self._connection._conn, operation, parameters, many)
            except Exception as error:
                adapt._handle_exception(error)
            self._keep(outcome)
            return True
        return False

    async def _call(self, operation: str, parameters: Any, many: bool) -> None:
        adapt = cast(_OneHopConnection, self._adapt_connection)
        async with adapt._execute_mutex:
            driver = self._connection
            short = adapt.wal and _SHORT.get()
            if short and _runs_inline(operation, parameters, many, adapt.holds_write_lock):
                outcome = _run(driver._conn, operation, parameters, many)
            elif (
                short
                and _is_begin_immediate(operation)
                and _begin_at_once(driver._conn, adapt.busy_ms(driver._conn))
            ):
                outcome = (None, None, -1, None)
                adapt.holds_write_lock = True
            else:
                handed = await driver._execute(
                    _run_handed, driver._conn, operation, [parameters], many
                )
                outcome = handed.pop()
                verb = _verb(operation)
                if verb.startswith("BEGIN"):
                    adapt.holds_write_lock = "IMMEDIATE" in operation.upper()
                elif verb.startswith("PRAGMA") and _JOURNAL_MODE.match(operation):
                    adapt.wal = bool(outcome[1]) and str(outcome[1][0][0]).lower() == "wal"
        self._keep(outcome)

    def _keep(self, outcome: Outcome) -> None:
        """Hold a statement's outcome: its rows only in the deque that fetching empties
        (the cursor outlives its result: a row kept beside it, a tool result of many
        megabytes, would stay in memory until the connection's next statement)."""
        description, rows, rowcount, lastrowid = outcome
        self._outcome = (description, None, rowcount, lastrowid)
        self._rows = collections.deque(rows or ())

    async def _execute_async(self, operation: Any, parameters: Any) -> None:
        await self._call(operation, parameters, False)

    async def _executemany_async(self, operation: Any, seq_of_parameters: Sequence[Any]) -> None:
        await self._call(operation, seq_of_parameters, True)


class _OneHopConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ("_busy_ms", "holds_write_lock", "wal")
    _cursor_cls = _OneHopCursor

    def __init__(self, dbapi: Any, connection: Any) -> None:
        super().__init__(dbapi, connection)
        self.wal = False
        """Whether the connection's own ``PRAGMA journal_mode`` answered ``wal``."""
        self.holds_write_lock = False
        """Inside ``BEGIN IMMEDIATE``: writes cannot wait for the lock any more."""
        self._busy_ms: int | None = None

    def busy_ms(self, conn: sqlite3.Connection) -> int:
        """The connection's busy timeout, as its set-up left it (read once)."""
        if self._busy_ms is None:
            self._busy_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        return self._busy_ms

    def rollback(self) -> None:
        self.holds_write_lock = False
        driver = self._connection
        if driver._connection is not None and self.wal:
            try:
                driver._conn.rollback()  # never waits for a lock
            except Exception as error:
                self._handle_exception(error)
            return
        super().rollback()

    def commit(self) -> None:
        self.holds_write_lock = False
        driver = self._connection
        if driver._connection is not None and self.wal and _SHORT.get():
            try:
                driver._conn.commit()  # never waits for a lock in WAL mode (see above)
            except Exception as error:
                self._handle_exception(error)
            return
        super().commit()


class OneHopAiosqliteDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """SQLAlchemy's aiosqlite DBAPI shim, with :class:`_OneHopCursor` cursors.

    Pass as ``module=`` to :func:`sqlalchemy.ext.asyncio.create_async_engine`.
    """

    def __init__(self) -> None:
        super().__init__(aiosqlite, sqlite3)

    def connect(self, *arg: Any, **kw: Any) -> _OneHopConnection:
        creator_fn = kw.pop("async_creator_fn", None)
        if creator_fn:
            connection = creator_fn(*arg, **kw)
        else:
            # used from the event loop's thread too, never at the same time (see above)
            kw["check_same_thread"] = False
            connection = aiosqlite.connect(*arg, **kw)
            connection._thread.daemon = True  # never keeps the interpreter alive
        return _OneHopConnection(self, await_(connection))


class InlineAsyncConnection(AsyncConnection):
    """An :class:`~sqlalchemy.ext.asyncio.AsyncConnection` that runs a statement which
    cannot wait for a lock without SQLAlchemy's greenlet round trip.

    ``await conn.execute(...)`` runs the synchronous ``execute`` in a new greenlet and
    insists that it awaits something, so even a statement run on the loop's thread (see
    :func:`short_statements`) switched into the greenlet, out to the loop and back in:
    about a third of SQLAlchemy's cost of a short statement on a virtual machine (65 of
    200 µs, the driver's own call taking 14), and a turn runs about 17 of them. Inside
    :func:`short_statements`, on a connection in WAL mode that no other call is using,
    a ``SELECT``, or an ``INSERT``, ``UPDATE`` or ``DELETE`` of at most
    :data:`INLINE_ROWS` rows once the write lock is held, is executed synchronously
    instead: the same statement, events and result, without the switches. Anything
    else (a transaction to begin with ``BEGIN IMMEDIATE``, a streamed result, explicit
    execution options) takes SQLAlchemy's way.

    Such a statement that the store runs again and again, when nothing listens to the
    engine's statements, skips SQLAlchemy's execution too: it is compiled once and
    bound as SQLAlchemy binds it (:mod:`store.sql.drivers.prepared`), then sent to the driver
    here, its rows handed back as a SQLAlchemy result of the same values.
    """

    __slots__ = ()

    async def execute(
        self,
        statement: Executable,
        parameters: Any = None,
        *,
        execution_options: Any = None,
    ) -> CursorResult[Any]:
        sync = self._proxied
        if execution_options is None and _at_once(sync, statement, parameters):
            prepared = _run_prepared(sync, statement, parameters)
            if prepared is not None:
                return cast(CursorResult[Any], prepared)  # the Result API, and rowcount
            return sync.execute(statement, parameters)
        result: CursorResult[Any] = await super().execute(
            statement, parameters, execution_options=execution_options
        )
        return result

    async def close(self) -> None:
        if not self._closed_at_once():
            await super().close()

    async def __aexit__(self, type_: Any, value: Any, traceback: Any) -> None:
        if not self._closed_at_once():
            await super().__aexit__(type_, value, traceback)

    def _closed_at_once(self) -> bool:
        """Close here, synchronously, when nothing in closing can wait: inside
        :func:`short_statements`, a WAL connection that goes back to a pool with room
        for it (its rollback runs on the loop's thread, see :meth:`_OneHopConnection.rollback`).
        SQLAlchemy's own close runs in a greenlet, in a task of its own so that a
        cancellation cannot interrupt it: about 95 of the 210 µs a connection costs."""
        sync = self.sync_connection
        if sync is None or _free_short(sync) is None:
            return False
        pool = sync.engine.pool
        if not isinstance(pool, QueuePool) or pool.checkedin() >= pool.size():
            return False  # a connection the pool has no room for is closed: that awaits
        sync.close()
        return True


class InlineAsyncEngine(PreparedEngine):
    """An :class:`~sqlalchemy.ext.asyncio.AsyncEngine` making
    :class:`InlineAsyncConnection` connections (its views with other execution options
    too)."""

    __slots__ = ()
    _connection_cls = InlineAsyncConnection


_READ_STATEMENTS = (Select, CompoundSelect)
_WRITE_STATEMENTS = (Insert, Update, Delete)


def _free_short(sync: Connection) -> _OneHopConnection | None:
    """The driver connection of ``sync`` when, inside :func:`short_statements`, it is an
    open WAL connection that no other call is using; else None."""
    if not _SHORT.get() or sync.closed or sync.invalidated:
        return None
    adapt = sync.connection.dbapi_connection
    if not isinstance(adapt, _OneHopConnection) or not adapt.wal or adapt._execute_mutex.locked():
        return None
    return adapt


def _at_once(sync: Connection, statement: Any, parameters: Any) -> bool:
    """Whether ``statement`` runs on the loop's thread without waiting (see
    :class:`InlineAsyncConnection`)."""
    adapt = _free_short(sync)
    if adapt is None:
        return False
    if not sync.in_transaction() and sync.get_execution_options().get(WRITE_OPTION, False):
        return False  # its first statement begins with BEGIN IMMEDIATE, which may wait
    if statement.get_execution_options().get("stream_results", False):
        return False
    if isinstance(statement, _READ_STATEMENTS):
        return True
    if isinstance(statement, _WRITE_STATEMENTS) and adapt.holds_write_lock:
        return not isinstance(parameters, list) or len(parameters) <= INLINE_ROWS
    return False


def _run_prepared(sync: Connection, statement: Any, parameters: Any) -> PreparedResult | None:
    """Run ``statement`` (which :func:`_at_once` allows) on the loop's thread as
    :mod:`store.sql.drivers.prepared` compiled it, in the connection's transaction (begun as
    SQLAlchemy's own execution begins it); None when it is not prepared or something
    listens to the engine's statements, for SQLAlchemy to execute it."""
    sets = parameter_sets(parameters)
    if sets is None or listened(sync):
        return None
    prepared = prepare(sync.dialect, statement, sets)
    if prepared is None:
        return None
    if not sync.in_transaction():
        sync.begin()  # what SQLAlchemy's execution does first (its "begin" event included)
    adapt = cast(_OneHopConnection, sync.connection.dbapi_connection)
    many = len(sets) > 1
    bound: Any = (
        [prepared.bind(s) for s in sets] if many else prepared.bind(sets[0] if sets else {})
    )
    outcome = _run_here(adapt, prepared.sql, bound, many)
    description = outcome[0]
    coltypes = None if description is None else tuple(column[1] for column in description)
    return prepared.result(sync.dialect, coltypes, outcome[1], outcome[2])


def _run_here(adapt: _OneHopConnection, sql: str, parameters: Any, many: bool) -> Outcome:
    """Run a statement on the caller's thread, the driver's errors raised as SQLAlchemy
    would raise them (:class:`sqlalchemy.exc.DBAPIError`), for the store to translate."""
    try:
        try:
            return _run(adapt._connection._conn, sql, parameters, many)
        except Exception as error:
            adapt._handle_exception(error)  # a closed connection: the DBAPI's own error
            raise  # pragma: no cover - _handle_exception always raises
    except sqlite3.Error as error:
        raise sa_exc.DBAPIError.instance(sql, parameters, error, sqlite3.Error) from error


def rows_at_once(conn: AsyncConnection, sql: str, parameters: Sequence[Any]) -> list[Any] | None:
    """The rows of the ``SELECT`` ``sql`` (its parameters positional) as the driver's
    plain tuples, read on the caller's thread inside the connection's transaction, when
    :class:`InlineAsyncConnection` would run it at once and nothing listens to the
    engine's statements; None otherwise, for the caller to execute it the usual way.

    This is the read of many rows (a page of history): SQLAlchemy's result object, a
    ``Row`` per tuple and its processors, cost as much as the driver's own fetch, and the
    caller maps the tuples itself. The driver's errors are raised as SQLAlchemy would
    raise them (:class:`sqlalchemy.exc.DBAPIError`), for the store to translate."""
    sync = conn.sync_connection
    if sync is None or not sync.in_transaction() or listened(sync):
        return None
    adapt = _free_short(sync)
    if adapt is None:
        return None
    return _run_here(adapt, sql, parameters, False)[1] or []
