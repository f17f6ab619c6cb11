"""Reading another system's SQLite database, read-only, row by row, within bounds.

A source database is data, not code to run: a reader reads only real tables (a view, a
virtual table or a table with a generated column where a table is expected is refused,
since each computes what it gives and may never finish or grow without end), and every
query runs under a guard that stops it when it works without giving a row for more than
:data:`MIN_STEPS` steps of SQLite's machine (or :data:`STEPS_PER_BYTE` a byte of the
file, when that is more) or for longer than the import's ``timeout`` (the store's). Each
refusal is one :class:`~store.errors.InvalidSource` naming the source.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.importing.source import reading

__all__ = [
    "CHECK_EVERY",
    "MIN_STEPS",
    "SQLITE_HEADER",
    "STEPS_PER_BYTE",
    "SqliteDatabase",
    "columns",
    "is_sqlite",
    "name",
    "plain_table",
    "rows",
    "tables",
]

SQLITE_HEADER = b"SQLite format 3\x00"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VIRTUAL = re.compile(r"\s*CREATE\s+VIRTUAL\s", re.IGNORECASE)
_GENERATED = (2, 3)
"""``PRAGMA table_xinfo``'s ``hidden`` of a generated column (virtual, stored)."""

CHECK_EVERY = 10_000
"""Steps of SQLite's machine between two looks of the guard."""
MIN_STEPS = 20_000_000
"""Steps a query may take before its first row, or between two rows, whatever the size
of the file (reading and sorting a real table takes well under one a byte)."""
STEPS_PER_BYTE = 100
"""Steps a query may take between two rows for each byte of the file (and of its
``-wal``), when that is more than :data:`MIN_STEPS`."""
_FETCH = 256
"""Rows fetched at a time."""


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite database file."""
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _size(path: Path) -> int:
    total = 0
    for file in (path, path.with_name(path.name + "-wal")):
        try:
            total += file.stat().st_size
        except OSError:
            pass  # no -wal: nothing to add
    return total


class _Guard:
    """The progress handler of a source's connection: stops a query that has worked
    :attr:`steps` steps or :attr:`seconds` seconds since :meth:`restart`."""

    def __init__(self, steps: int, seconds: float) -> None:
        self.steps = steps
        self.seconds = seconds
        self.stopped: str | None = None
        """Why the guard stopped the query, once it has."""
        self._used = 0
        self._deadline = 0.0
        self.restart()

    def restart(self) -> None:
        """Start counting again (before a query, and before each fetch of its rows)."""
        self._used = 0
        self._deadline = time.monotonic() + self.seconds

    def __call__(self) -> int:
        self._used += CHECK_EVERY
        if self._used > self.steps:
            self.stopped = f"more than {self.steps:,} steps"
        elif time.monotonic() > self._deadline:
            self.stopped = f"longer than {self.seconds:g} s (the store's timeout)"
        return 0 if self.stopped is None else 1

    def refusal(self, source: str, error: sqlite3.Error) -> InvalidSource:
        """What to raise for ``error`` (a stop of the guard's, or another failure)."""
        if self.stopped is not None:
            return InvalidSource(
                source,
                None,
                f"a query of the database worked {self.stopped} without giving a row: "
                "refused (a source is read within bounds, docs/limits.md)",
            )
        return InvalidSource(source, None, f"cannot read the database ({error})")


@contextmanager
def _connected(path: Path, source: str) -> Iterator[tuple[sqlite3.Connection, _Guard]]:
    # A reader is a generator that the importer resumes from worker threads, one at a
    # time but not always the same one: the connection may move between threads.
    try:
        connection = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
        )
    except sqlite3.Error as error:
        raise InvalidSource(source, None, f"cannot open the database ({error})") from None
    guard = _Guard(max(MIN_STEPS, STEPS_PER_BYTE * _size(path)), reading().timeout)
    connection.set_progress_handler(guard, CHECK_EVERY)
    with closing(connection):
        yield connection, guard


def _unreadable(source: str, guard: _Guard, error: sqlite3.Error) -> InvalidSource:
    if guard.stopped is not None:
        return guard.refusal(source, error)
    return InvalidSource(source, None, f"not a readable database ({error})")


def tables(path: Path, source: str) -> set[str]:
    """The names of the database's tables and views (a view is refused when it is read:
    :func:`plain_table`)."""
    with _connected(path, source) as (connection, guard):
        try:
            found = connection.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            )
            return {name for (name,) in found}
        except sqlite3.DatabaseError as error:
            raise _unreadable(source, guard, error) from None


def columns(path: Path, source: str, table: str) -> set[str]:
    """The column names of ``table``."""
    with _connected(path, source) as (connection, guard):
        try:
            found = connection.execute(f"PRAGMA table_info({name(table, source)})")
            return {str(row[1]) for row in found}
        except sqlite3.DatabaseError as error:
            raise _unreadable(source, guard, error) from None


def name(value: str, source: str) -> str:
    """A table or column name, checked so that it can be written into SQL."""
    if not _NAME.match(value):
        raise InvalidSource(source, None, f"invalid table name {value!r}")
    return value


def _refusal(connection: sqlite3.Connection, table: str) -> str | None:
    """Why ``table`` is not read (no such table, a view, a virtual table, a generated
    column), or None when it is a real table of stored rows."""
    found = connection.execute(
        "SELECT type, sql FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name = ? COLLATE NOCASE",
        (table,),
    ).fetchone()
    if found is None:
        return f"no table {table}"
    kind, sql = found
    if kind != "table":
        return f"{table} is a {kind}, not a table: only tables are read"
    if isinstance(sql, str) and _VIRTUAL.match(sql):
        return f"{table} is a virtual table: only tables of stored rows are read"
    generated = [
        str(column[1])
        for column in connection.execute(f"PRAGMA table_xinfo({table})")
        if column[6] in _GENERATED
    ]
    if generated:
        return (
            f"{table} has generated columns ({', '.join(generated)}): "
            "only tables of stored columns are read"
        )
    return None


def plain_table(path: Path, source: str, table: str) -> str:
    """``table`` (a checked :func:`name`) when it is a real table of stored rows; else
    :class:`InvalidSource` saying what it is: only tables are read, never a view, a
    virtual table or a generated column, which compute what they give."""
    checked = name(table, source)
    with _connected(path, source) as (connection, guard):
        try:
            refused = _refusal(connection, checked)
        except sqlite3.DatabaseError as error:
            raise _unreadable(source, guard, error) from None
    if refused is not None:
        raise InvalidSource(source, None, refused)
    return checked


def rows(path: Path, source: str, query: str) -> Generator[tuple[Any, ...]]:
    """The rows of ``query``, streamed from a read-only connection; a query that works
    too long without giving a row is stopped (see the module's documentation)."""
    with _connected(path, source) as (connection, guard):
        try:
            cursor = connection.execute(query)
            while True:
                guard.restart()
                fetched = cursor.fetchmany(_FETCH)
                if not fetched:
                    return
                yield from fetched
        except sqlite3.DatabaseError as error:
            raise guard.refusal(source, error) from None


class SqliteDatabase:
    """A SQLite database file as a source: the functions above, bound to it."""

    row_id = "rowid"
    """The SQL that names a row's own place (``row 12``)."""

    def __init__(self, path: Path, source: str) -> None:
        self.path = path
        self.source = source

    def tables(self) -> set[str]:
        """The names of the database's tables and views (:func:`tables`)."""
        return tables(self.path, self.source)

    def columns(self, table: str) -> set[str]:
        """The column names of ``table`` (:func:`columns`)."""
        return columns(self.path, self.source, table)

    def plain_table(self, table: str) -> str:
        """``table`` when it is a real table of stored rows (:func:`plain_table`)."""
        return plain_table(self.path, self.source, table)

    def rows(self, query: str) -> Generator[tuple[Any, ...]]:
        """The rows of ``query``, streamed within bounds (:func:`rows`)."""
        return rows(self.path, self.source, query)

    def text_order(self, column: str) -> str:
        """``column`` sorted by SQLite's ``BINARY`` collation: UTF-8 bytes, which is
        code point order."""
        return f"{name(column, self.source)} COLLATE BINARY"
