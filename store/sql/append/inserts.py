"""The inserts of an append: ``INSERT`` statements compiled once per dialect, and sending
a statement's rows to the driver (``executemany``, or ``COPY`` where the database copies).

SQLAlchemy's per-row parameter handling (a dict per row, every key looked up, a
processor call per typed value) is replaced by the statement's own bind processors,
applied only to the columns that have one. The message ``INSERT``
(:data:`~store.sql.mapping.INSERT_MESSAGE`) takes ``contents`` and ``metadata`` as the
texts :mod:`store.sql.codec` encoded, once per message (no second serialization).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

from sqlalchemy import insert
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Insert

from store.errors import StoreError
from store.sql import dialect
from store.sql.dialect import kept_on
from store.sql.mapping import INSERT_MESSAGE
from store.sql.schema import GROUPS, UTCDateTime

__all__ = [
    "COPY_MIN_ROWS",
    "GROUP_COLUMNS",
    "INSERT_CHUNK",
    "MESSAGE_COLUMNS",
    "DriverInsert",
    "Processor",
    "Statement",
    "execute_inserts",
    "group_insert",
    "message_insert",
]

INSERT_CHUNK = 250
"""Message rows per ``executemany`` (one bound row each: no parameter limit applies)."""
Statement = tuple["DriverInsert", list[tuple[Any, ...]]]
"""An insert and its driver rows, for one ``executemany`` (or one ``COPY``)."""

LARGE_TEXT = 1 << 20
"""Characters of a stored text from which its rows go one statement each: asyncpg's
``executemany`` writes every row into one growing buffer, then joins and copies it on
the way out, several copies of a tool result of many megabytes at once."""
_TEXT_PARAMETERS = frozenset({"contents_json", "metadata_json"})
"""The parameters that bind a message's stored texts."""

COPY_MIN_ROWS = 64
"""Where the database copies rows (PostgreSQL), a statement of at least this many rows
goes as one ``COPY`` rather than an ``executemany`` (a bulk append; a turn's few rows
stay a plain insert)."""

_COPY_COLUMNS = {"contents_json": "contents", "metadata_json": "metadata"}
"""The column each bound parameter of a message row fills, where they differ."""

_INSERT_MESSAGES = INSERT_MESSAGE

MESSAGE_COLUMNS: Final = (
    "tenant",
    "session_id",
    "seq",
    "anchor",
    "slot",
    "message_id",
    "role",
    "contents_json",
    "author_name",
    "created_at",
    "stored_at",
    "metadata_json",
    "content_hash",
    "group_id",
    "token_count",
    "excluded",
    "excluded_reason",
    "excluded_event_id",
    "source_system",
    "source_id",
    "imported_at",
    "group_kind",
)
"""The bound parameters of a message row, in the order of the compiled ``INSERT``."""

Processor = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


_SAMPLE_TIMES: Final = (
    None,
    datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(5, 1, 2, 3, 4, 5),
    datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
)


def _sqlite_timestamps(process: Processor) -> Processor:
    """``process``, the bind processor of a :class:`UTCDateTime`, made faster for
    datetimes when it gives SQLite's text (naive UTC, ``YYYY-MM-DD HH:MM:SS.ffffff``):
    the same text without its two layers of calls. Any other processor (another
    dialect's, another format) is returned as it is."""

    def fast(value: Any) -> Any:
        if type(value) is not datetime:
            return process(value)
        zone = value.tzinfo
        if zone is UTC:  # the usual case: the text without its "+00:00"
            return value.isoformat(" ", "microseconds")[:26]
        if zone is not None:
            value = value.astimezone(UTC)
        return value.replace(tzinfo=None).isoformat(" ", "microseconds")

    same = all(type(fast(v)) is type(process(v)) and fast(v) == process(v) for v in _SAMPLE_TIMES)
    return fast if same else process


@dataclass(frozen=True, slots=True)
class DriverInsert:
    """An ``INSERT`` compiled once for a dialect, its rows sent to the driver as tuples.

    SQLAlchemy's per-row parameter handling (a dict per row, every key looked up, a
    processor call per typed value) is replaced by the statement's own bind processors,
    applied by the caller only where a column has one (:meth:`processor`).
    :meth:`row` binds a row given as a mapping the same way (tests compare the two).
    """

    sql: str
    columns: tuple[str, ...]
    """The bound parameters in the order the driver takes them."""
    processors: Mapping[str, Processor]
    """The bind processor of each parameter that has one."""
    table: str = ""
    """The table the rows go to (for ``COPY``)."""
    table_columns: tuple[str, ...] = ()
    """The table's column of each of :attr:`columns` (for ``COPY``)."""
    texts: tuple[int, ...] = ()
    """Where in a row the stored texts are (their size decides how rows are sent)."""

    @classmethod
    def compile(cls, statement: Insert, columns: Sequence[str], dialect: Dialect) -> DriverInsert:
        """Compile ``statement`` binding ``columns`` (every row gives them all)."""
        compiled = statement.compile(dialect=dialect, column_keys=list(columns))
        order = tuple(compiled.positiontup or ())
        if sorted(order) != sorted(columns):  # pragma: no cover - a default or a missing key
            raise ValueError(f"statement binds {order}, expected {tuple(columns)}")
        processors: dict[str, Processor] = {}
        # the processors SQLAlchemy's own execution context applies to these parameters
        for name, processor in compiled._bind_processors.items():
            if isinstance(name, str) and name in order and callable(processor):
                timestamp = isinstance(compiled.binds[name].type, UTCDateTime)
                processors[name] = _sqlite_timestamps(processor) if timestamp else processor
        targets = tuple(_COPY_COLUMNS.get(name, name) for name in order)
        texts = tuple(i for i, name in enumerate(order) if name in _TEXT_PARAMETERS)
        return cls(str(compiled), order, processors, statement.table.name, targets, texts)

    def processor(self, name: str) -> Processor:
        """The bind processor of parameter ``name`` (the identity when it has none)."""
        return self.processors.get(name, _identity)

    def row(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The driver row of ``values``, a mapping of every bound parameter."""
        out: list[Any] = []
        for name in self.columns:
            value, process = values[name], self.processors.get(name)
            out.append(value if process is None else process(value))
        return tuple(out)


GROUP_COLUMNS: Final = (
    "tenant",
    "session_id",
    "group_id",
    "kind",
    "turn",
    "anchor",
    "slot",
    "first_seq",
    "first_position",
    "message_count",
    "token_count",
    "has_reasoning",
    "pending_calls",
    "orphan",
    "created_at",
)
"""The bound parameters of a new group's row, in the order of the compiled ``INSERT``."""


def _driver_insert(
    dialect: Dialect, key: str, statement: Insert, columns: tuple[str, ...]
) -> DriverInsert:
    compiled: dict[str, DriverInsert] = kept_on(dialect, "driver_inserts", dict)
    found = compiled.get(key)
    if found is None:
        found = DriverInsert.compile(statement, columns, dialect)
        if found.columns != columns:  # pragma: no cover - the table's columns moved
            raise RuntimeError(f"unexpected {key} insert parameters: {found.columns}")
        compiled[key] = found
    return found


def message_insert(dialect: Dialect) -> DriverInsert:
    """The message ``INSERT`` for ``dialect``, binding :data:`MESSAGE_COLUMNS` in that order."""
    return _driver_insert(dialect, "message", _INSERT_MESSAGES, MESSAGE_COLUMNS)


_INSERT_GROUPS = insert(GROUPS)


def group_insert(dialect: Dialect) -> DriverInsert:
    """The group ``INSERT`` for ``dialect``, binding :data:`GROUP_COLUMNS` in that order."""
    return _driver_insert(dialect, "group", _INSERT_GROUPS, GROUP_COLUMNS)


async def execute_inserts(conn: AsyncConnection, statements: Sequence[Statement]) -> None:
    """Send each statement's rows: one ``COPY`` where the database copies rows and they
    are many enough, else one ``executemany``."""
    copies = dialect.of(conn).copy_rows
    for insert_rows, rows in statements:
        if copies and len(rows) >= COPY_MIN_ROWS:
            await _copy(conn, insert_rows, rows)
        elif insert_rows.texts and _holds_large_text(rows, insert_rows.texts):
            for row in rows:
                await conn.exec_driver_sql(insert_rows.sql, row)
        else:
            await conn.exec_driver_sql(insert_rows.sql, rows)


def _holds_large_text(rows: Sequence[tuple[Any, ...]], texts: tuple[int, ...]) -> bool:
    """Whether a stored text of ``rows`` (at the indexes ``texts``) is a large one."""
    return any(len(row[index]) > LARGE_TEXT for row in rows for index in texts)


async def _copy(
    conn: AsyncConnection, insert_rows: DriverInsert, rows: list[tuple[Any, ...]]
) -> None:
    """Send ``rows`` with the driver's ``COPY`` (asyncpg's binary protocol), in the
    connection's transaction."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    try:
        await driver.copy_records_to_table(
            insert_rows.table, records=rows, columns=list(insert_rows.table_columns)
        )
    except Exception as error:  # the driver's own errors: reported as a database failure
        if isinstance(error, StoreError | asyncio.CancelledError):
            raise
        raise StoreError(f"database error: {error}") from error
