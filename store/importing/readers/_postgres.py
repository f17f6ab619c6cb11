"""Reading another system's PostgreSQL database, read-only, row by row, within bounds.

The readers are synchronous iterators that the importer resumes on its event loop's
thread, and the driver is asyncpg, the one chatledger already uses for PostgreSQL (no
second driver to install or to keep working): each connection runs on a private event
loop in a thread of its own, and the reader waits for each step there.

What :mod:`~store.importing.readers._sqlite` holds for a SQLite file holds here: only
real tables are read (a view, a materialized view, a foreign table or a table with a
generated column where a table is expected is refused), every connection is opened
with ``default_transaction_read_only`` and reads in one ``READ ONLY``, ``REPEATABLE
READ`` transaction, and every statement runs under ``statement_timeout``, the import's
``timeout`` (the store's): a query that works longer than that without giving the next
rows is stopped. Rows stream through a server-side cursor, :data:`FETCH` at a time, so a
big table is never loaded whole. Each refusal is one :class:`~store.errors.InvalidSource`
naming the database by its URL with the password hidden.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]

from store.errors import InvalidSource
from store.importing.readers._sqlite import name
from store.importing.source import DatabaseUrl, reading

__all__ = ["FETCH", "PostgresDatabase"]

T = TypeVar("T")

FETCH = 256
"""Rows fetched at a time."""
_TABLES = "r", "p"
"""``pg_class.relkind`` of tables of stored rows (plain and partitioned)."""
_KINDS = {"v": "view", "m": "materialized view", "f": "foreign table"}
_STOPPED = "57014"
"""SQLSTATE of a statement cancelled (by ``statement_timeout``)."""
_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


class _Loop:
    """A private event loop on a daemon thread, where one connection's coroutines run
    while the synchronous reader waits."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="chatledger-source", daemon=True
        )
        self._thread.start()

    def run(self, step: Coroutine[Any, Any, T]) -> T:
        """``step``'s result, run on the private loop."""
        if threading.current_thread() is self._thread:  # a finalizer on the loop itself
            step.close()
            raise RuntimeError("a source's step cannot wait on its own loop")
        return asyncio.run_coroutine_threadsafe(step, self._loop).result()

    def close(self) -> None:
        """Stop the loop and its thread."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()
            self._loop.close()


class PostgresDatabase:
    """A PostgreSQL database source (see the module's documentation); the shape of
    :class:`~store.importing.readers._sqlite.SqliteDatabase`."""

    row_id = "NULL"
    """A row has no stable place of its own to name (SQLite's ``rowid``)."""

    def __init__(self, url: DatabaseUrl, source: str) -> None:
        self.url = url
        self.source = source

    @contextmanager
    def _connected(self) -> Iterator[tuple[_Loop, Any]]:
        timeout = reading().timeout
        loop = _Loop()
        try:
            connection = loop.run(
                asyncpg.connect(
                    self.url.dsn,
                    timeout=timeout,
                    statement_cache_size=0,
                    server_settings={
                        "default_transaction_read_only": "on",
                        "statement_timeout": str(max(1, round(timeout * 1000))),
                        "application_name": "chatledger import",
                    },
                )
            )
        except _FAILURES as error:
            loop.close()
            raise InvalidSource(self.source, None, f"cannot open the database ({error})") from None
        try:
            yield loop, connection
        finally:
            try:
                loop.run(connection.close(timeout=timeout))
            except (*_FAILURES, RuntimeError):
                connection.terminate()  # closing is all that was left to do
            loop.close()

    def _refusal(self, error: BaseException) -> InvalidSource:
        if getattr(error, "sqlstate", None) == _STOPPED:
            return InvalidSource(
                self.source,
                None,
                f"a query of the database worked longer than {reading().timeout:g} s "
                "(the store's timeout) without giving a row: refused (a source is read "
                "within bounds, docs/limits.md)",
            )
        return InvalidSource(self.source, None, f"cannot read the database ({error})")

    def _fetch(self, query: str, *args: Any) -> list[Any]:
        with self._connected() as (loop, connection):
            try:
                return list(loop.run(connection.fetch(query, *args)))
            except _FAILURES as error:
                raise self._refusal(error) from None

    def tables(self) -> set[str]:
        """The names of the tables and views on the search path (a view is refused
        when it is read: :meth:`plain_table`)."""
        found = self._fetch(
            "SELECT relname::text FROM pg_class WHERE relkind IN ('r', 'p', 'v', 'm', 'f') "
            "AND pg_table_is_visible(oid)"
        )
        return {str(row[0]) for row in found}

    def columns(self, table: str) -> set[str]:
        """The column names of ``table``."""
        found = self._fetch(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass($1) "
            "AND attnum > 0 AND NOT attisdropped",
            name(table, self.source),
        )
        return {str(row[0]) for row in found}

    def plain_table(self, table: str) -> str:
        """``table`` (a checked :func:`~store.importing.readers._sqlite.name`) when it
        is a real table of stored columns; else :class:`InvalidSource` saying what it
        is."""
        checked = name(table, self.source)
        found = self._fetch(
            "SELECT c.relkind::text, ARRAY(SELECT attname::text FROM pg_attribute "
            "WHERE attrelid = c.oid AND attnum > 0 AND NOT attisdropped "
            "AND attgenerated <> '' ORDER BY attnum) "
            "FROM pg_class c WHERE c.oid = to_regclass($1)",
            checked,
        )
        if not found:
            raise InvalidSource(self.source, None, f"no table {checked}")
        kind, generated = str(found[0][0]), list(found[0][1])
        if kind not in _TABLES:
            what = _KINDS.get(kind, "relation")
            raise InvalidSource(
                self.source, None, f"{checked} is a {what}, not a table: only tables are read"
            )
        if generated:
            raise InvalidSource(
                self.source,
                None,
                f"{checked} has generated columns ({', '.join(generated)}): "
                "only tables of stored columns are read",
            )
        return checked

    def rows(self, query: str) -> Generator[tuple[Any, ...]]:
        """The rows of ``query``, streamed through a server-side cursor in a read-only
        transaction; a statement that works too long is stopped (see the module's
        documentation)."""
        with self._connected() as (loop, connection):
            try:
                transaction = connection.transaction(isolation="repeatable_read", readonly=True)
                loop.run(transaction.start())
                cursor = loop.run(_cursor(connection, query))
                while True:
                    fetched = loop.run(cursor.fetch(FETCH))
                    if not fetched:
                        break
                    for row in fetched:
                        yield tuple(row)
                loop.run(transaction.rollback())
            except _FAILURES as error:
                raise self._refusal(error) from None

    def text_order(self, column: str) -> str:
        """``column`` sorted by the ``C`` collation: UTF-8 bytes, which is code point
        order (the database's own collation may sort otherwise)."""
        return f'{name(column, self.source)} COLLATE "C"'


async def _cursor(connection: Any, query: str) -> Any:
    """A server-side cursor of ``query`` (within the open transaction)."""
    return await connection.cursor(query)
