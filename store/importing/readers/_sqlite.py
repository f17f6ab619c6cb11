"""Reading another system's SQLite database, read-only, row by row."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from store.errors import InvalidSource

__all__ = ["SQLITE_HEADER", "columns", "is_sqlite", "name", "rows", "tables"]

SQLITE_HEADER = b"SQLite format 3\x00"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite database file."""
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _connect(path: Path, source: str) -> sqlite3.Connection:
    # A reader is a generator that the importer resumes from worker threads, one at a
    # time but not always the same one: the connection may move between threads.
    try:
        return sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
        )
    except sqlite3.Error as error:
        raise InvalidSource(source, None, f"cannot open the database ({error})") from None


def tables(path: Path, source: str) -> set[str]:
    """The names of the database's tables."""
    with closing(_connect(path, source)) as connection:
        try:
            found = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {name for (name,) in found}
        except sqlite3.DatabaseError as error:
            raise InvalidSource(source, None, f"not a readable database ({error})") from None


def columns(path: Path, source: str, table: str) -> set[str]:
    """The column names of ``table``."""
    with closing(_connect(path, source)) as connection:
        try:
            found = connection.execute(f"PRAGMA table_info({name(table, source)})")
            return {str(row[1]) for row in found}
        except sqlite3.DatabaseError as error:
            raise InvalidSource(source, None, f"not a readable database ({error})") from None


def name(value: str, source: str) -> str:
    """A table or column name, checked so that it can be written into SQL."""
    if not _NAME.match(value):
        raise InvalidSource(source, None, f"invalid table name {value!r}")
    return value


def rows(path: Path, source: str, query: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query``, streamed from a read-only connection."""
    with closing(_connect(path, source)) as connection:
        try:
            yield from connection.execute(query)
        except sqlite3.DatabaseError as error:
            raise InvalidSource(source, None, f"cannot read the database ({error})") from None
