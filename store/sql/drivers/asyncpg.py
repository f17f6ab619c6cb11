"""PostgreSQL through asyncpg, with the statements the store repeats sent without
SQLAlchemy's execution.

A turn on PostgreSQL is about 20 round trips to the server. Each statement also went
through SQLAlchemy's execution (its cache key, an execution context, every parameter
through ``construct_params``, a cursor result) and, for ``await conn.execute(...)``,
a switch into a new greenlet and back: profiled with py-spy (1,000 messages, 300
turns), SQLAlchemy's frames and the greenlet's were about a fifth of a turn's time on
the event loop's thread.

:class:`PreparedAsyncConnection` runs a statement that :mod:`store.sql.drivers.prepared` has
compiled once (one the store runs again and again, when nothing listens to the
engine's statements) on asyncpg directly, as SQLAlchemy's asyncpg adapter runs it: under
the adapter's lock for the connection, in the transaction the adapter begins (none in
autocommit), through the adapter's cache of asyncpg prepared statements, with the
bind processors SQLAlchemy applies, and the result processors it chooses for the column
types asyncpg describes. A driver error takes SQLAlchemy's own handling (translated,
a lost connection invalidated), so the store sees the same exceptions. Everything else
(a statement seen for the first time, execution options, a streamed result, a
connection in another state) is executed by SQLAlchemy, unchanged.
"""

from __future__ import annotations

import re
from typing import Any, cast

from sqlalchemy import CompoundSelect, Delete, Insert, Select, Update
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.util.concurrency import greenlet_spawn

from store.sql.drivers.prepared import (
    PreparedEngine,
    PreparedResult,
    listened,
    parameter_sets,
    prepare,
)

__all__ = ["PreparedAsyncConnection", "PreparedAsyncEngine"]

_STATEMENTS = (Select, CompoundSelect, Insert, Update, Delete)
_ADAPTER_PARTS = (
    "_check_type_cache_invalidation",
    "_execute_mutex",
    "_prepare",
    "_start_transaction",
    "_transaction",
    "_connection",
    "_handle_exception",
)
"""What this module uses of SQLAlchemy's asyncpg adapter connection: one that lacks any
of it (another SQLAlchemy version) is left to SQLAlchemy."""
_STATUS = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")


class PreparedAsyncConnection(AsyncConnection):
    """An :class:`~sqlalchemy.ext.asyncio.AsyncConnection` that runs the statements
    :mod:`store.sql.drivers.prepared` compiled once on asyncpg directly (see the module)."""

    __slots__ = ()

    async def execute(
        self,
        statement: Executable,
        parameters: Any = None,
        *,
        execution_options: Any = None,
    ) -> CursorResult[Any]:
        if execution_options is None:
            prepared = await _run_prepared(self._proxied, statement, parameters)
            if prepared is not None:
                return cast(CursorResult[Any], prepared)  # the Result API, and rowcount
        result: CursorResult[Any] = await super().execute(
            statement, parameters, execution_options=execution_options
        )
        return result


class PreparedAsyncEngine(PreparedEngine):
    """An :class:`~sqlalchemy.ext.asyncio.AsyncEngine` making
    :class:`PreparedAsyncConnection` connections (its views with other execution options
    too)."""

    __slots__ = ()
    _connection_cls = PreparedAsyncConnection


def _adapter(sync: Connection) -> Any:
    """The asyncpg adapter connection of ``sync``, when it is open and idle and of the
    shape this module knows; else None."""
    if sync.closed or sync.invalidated:
        return None
    adapt = sync.connection.dbapi_connection
    if adapt is None or not all(hasattr(adapt, part) for part in _ADAPTER_PARTS):
        return None
    if adapt._execute_mutex.locked():
        return None  # another call is using it: SQLAlchemy waits its turn
    return adapt


async def _run_prepared(sync: Connection, statement: Any, parameters: Any) -> PreparedResult | None:
    """Run ``statement`` on asyncpg as :mod:`store.sql.drivers.prepared` compiled it; None when
    SQLAlchemy should execute it."""
    if not isinstance(statement, _STATEMENTS):
        return None
    if statement.get_execution_options() or sync.get_execution_options().get("stream_results"):
        return None
    sets = parameter_sets(parameters)
    if sets is None or listened(sync):
        return None
    adapt = _adapter(sync)
    if adapt is None:
        return None
    prepared = prepare(sync.dialect, statement, sets)
    if prepared is None:
        return None
    if not sync.in_transaction():
        sync.begin()  # what SQLAlchemy's execution does first (its "begin" event included)
    many = len(sets) > 1
    sql = prepared.sql
    if many:
        bound: Any = [prepared.bind(s) for s in sets]
    else:
        bound = prepared.bind(sets[0] if sets else {})
    invalidated_at = getattr(sync.dialect, "_invalidate_schema_cache_asof", 0)
    try:
        async with adapt._execute_mutex:
            if adapt._transaction is None:
                await adapt._start_transaction()  # none in autocommit
            if many:
                await adapt._check_type_cache_invalidation(invalidated_at)
                await adapt._connection.executemany(sql, bound)
                return prepared.result(sync.dialect, None, None, -1)
            statement_, attributes = await adapt._prepare(sql, invalidated_at)
            rows = await statement_.fetch(*bound)
            status = statement_.get_statusmsg()
    except Exception as error:
        await greenlet_spawn(_raise_as_sqlalchemy, sync, adapt, error, sql, bound)
        raise  # pragma: no cover - _raise_as_sqlalchemy always raises
    found = _STATUS.match(status or "")
    rowcount = int(found.group(1)) if found else -1
    coltypes = tuple(attribute.type.oid for attribute in attributes) if attributes else None
    return prepared.result(sync.dialect, coltypes, rows, rowcount)


def _raise_as_sqlalchemy(
    sync: Connection, adapt: Any, error: Exception, sql: str, parameters: Any
) -> None:
    """Raise ``error`` as SQLAlchemy's execution would: translated by the adapter into
    the DBAPI's exception, then wrapped and handled by the connection (a lost
    connection invalidated). Runs in a greenlet: invalidating closes the connection."""
    try:
        adapt._handle_exception(error)
    except Exception as translated:
        sync._handle_dbapi_exception(translated, sql, parameters, None, None)  # raises
        raise
