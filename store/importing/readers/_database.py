"""A database source, whatever its engine: what the database readers need of it.

A reader of another system's database asks :func:`open_database` for the source's
:class:`Database` (a SQLite file, :mod:`~store.importing.readers._sqlite`, or a
PostgreSQL URL, :mod:`~store.importing.readers._postgres`), checks the tables it reads
with :meth:`Database.plain_table` (only tables of stored rows are read) and their
columns with :meth:`Database.columns`, and streams the rows of one ``SELECT`` at a time
with :meth:`Database.rows`, written in the SQL both engines share (names checked with
:func:`~store.importing.readers._sqlite.name`, no parameters; :meth:`Database.text_order`
where two reads are merged by a text column). Both read only, and stop
a query that works longer than the import's ``timeout`` without giving a row; every
failure is one :class:`~store.errors.InvalidSource` naming the source (a URL with its
password hidden).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

from store.importing.readers._postgres import PostgresDatabase
from store.importing.readers._sqlite import SqliteDatabase
from store.importing.source import DatabaseUrl, Location

__all__ = ["Database", "open_database"]


class Database(Protocol):
    """A database source, read-only, row by row, within bounds."""

    source: str
    """The database as the import names it (a URL's password hidden)."""
    row_id: str
    """The SQL naming a row's own place in its table (SQLite's ``rowid``), or ``NULL``
    where rows have none (PostgreSQL)."""

    def tables(self) -> set[str]:
        """The names of the tables and views."""
        ...

    def columns(self, table: str) -> set[str]:
        """The column names of ``table``."""
        ...

    def plain_table(self, table: str) -> str:
        """``table``, checked: a real table of stored columns, else refused."""
        ...

    def rows(self, query: str) -> Generator[tuple[Any, ...]]:
        """The rows of ``query``, streamed."""
        ...

    def text_order(self, column: str) -> str:
        """An ``ORDER BY`` term sorting the text ``column`` as Python sorts ``str`` (by
        code point), whatever the database's collation: so that two queries' rows can
        be merged by that column."""
        ...


def open_database(location: Location, source: str) -> Database:
    """The database at ``location`` (a SQLite file or a PostgreSQL URL); ``source`` is
    how the import names it. Nothing is opened until it is read."""
    if isinstance(location, DatabaseUrl):
        return PostgresDatabase(location, source)
    return SqliteDatabase(location, source)
