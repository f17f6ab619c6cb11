"""SQLite through aiosqlite with one hand-off to its thread per statement.

aiosqlite runs each call on the connection's own thread. SQLAlchemy's adapter makes
four such calls for a ``SELECT`` (open a cursor, execute, fetch, close) and three for
other statements; on an idle virtual machine each hand-off costs a thread wake-up, and
together they were most of a turn's time (about 0.5 ms a statement where the driver
call itself takes 0.03 ms). This adapter runs the whole statement, fetch and close in
one call on aiosqlite's thread, through aiosqlite's ``Connection._execute`` (the
function behind all of aiosqlite's own methods). Everything else (transactions,
errors, connection set-up) is SQLAlchemy's aiosqlite adapter, unchanged.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

__all__ = ["OneHopAiosqliteDBAPI"]

Outcome = tuple[Any, list[Any] | None, int, int | None]
"""A statement's description, rows (None without a result), rowcount and lastrowid."""


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

    async def _call(self, operation: str, parameters: Any, many: bool) -> None:
        async with self._adapt_connection._execute_mutex:
            driver = self._connection
            outcome: Outcome = await driver._execute(
                _run, driver._conn, operation, parameters, many
            )
        self._outcome = outcome
        self._rows = collections.deque(outcome[1] or ())

    async def _execute_async(self, operation: Any, parameters: Any) -> None:
        await self._call(operation, parameters, False)

    async def _executemany_async(self, operation: Any, seq_of_parameters: Sequence[Any]) -> None:
        await self._call(operation, seq_of_parameters, True)


class _OneHopConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = _OneHopCursor


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
            connection = aiosqlite.connect(*arg, **kw)
            connection._thread.daemon = True  # never keeps the interpreter alive
        return _OneHopConnection(self, await_(connection))
