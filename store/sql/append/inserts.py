"""The inserts of an append: ``INSERT`` statements compiled once per dialect, and sending
a statement's rows to the driver (``executemany``, or ``COPY`` where the database copies).

SQLAlchemy's per-row parameter handling (a dict per row, every key looked up, a
processor call per typed value) is replaced by the statement's own bind processors,
applied only to the columns that have one. The message ``INSERT``
(:data:`~store.sql.mapping.INSERT_MESSAGE`) takes ``contents`` and ``metadata`` as the
texts :mod:`store.sql.codec` encoded, once per message (no second serialization).

A message row holding a stored text of over :data:`LARGE_TEXT` characters (a tool
result of many megabytes) goes on its own, so that the driver holds no copy of the text
that it does not need (``docs/limits.md``, "Memory"):

* where the database copies rows (PostgreSQL), as a ``COPY`` of that one row in text
  format, the text sent a slice of :data:`TEXT_SLICE` characters at a time (an
  ``INSERT`` has asyncpg write the whole text into its parameter buffer, copy that into
  the message, and asyncio copy what the socket did not take at once: three copies);
* elsewhere (SQLite), inserted with its texts as ``null`` and then written by an
  ``UPDATE`` that is bound again with nothing at once: SQLite keeps a statement's bound
  values until it is bound again, and the driver keeps its statements, so the
  ``INSERT`` of a turn would have kept the text in memory until the connection's next
  insert.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import cache
from operator import itemgetter
from typing import Any, Final

from sqlalchemy import bindparam, insert, update
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Insert

from store.errors import StoreError
from store.sql import dialect
from store.sql.codec import ENCODED
from store.sql.dialect import kept_on
from store.sql.drivers.sqlite_file import LIBRARY_VERSION
from store.sql.mapping import INSERT_MESSAGE
from store.sql.schema import GROUPS, MESSAGES, UTCDateTime

__all__ = [
    "COPY_MIN_ROWS",
    "GROUP_COLUMNS",
    "INSERT_CHUNK",
    "MESSAGE_COLUMNS",
    "TEXT_SLICE",
    "DriverInsert",
    "Processor",
    "Statement",
    "execute_inserts",
    "group_insert",
    "holds_large_text",
    "message_insert",
]

INSERT_CHUNK = 250
"""Message rows per ``executemany`` (one bound row each: no parameter limit applies)."""
Statement = tuple["DriverInsert", list[tuple[Any, ...]]]
"""An insert and its driver rows, for one ``executemany`` (or one ``COPY``)."""

LARGE_TEXT = 1 << 20
"""Characters of a stored text from which its row goes on its own, the text in slices
where the database copies rows (see the module): asyncpg's ``executemany`` writes every
row into one growing buffer, then joins and copies it on the way out, several copies of
a tool result of many megabytes at once."""
TEXT_SLICE = 1 << 20
"""Characters of a large text sent in one ``COPY`` message."""
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
    "search_text",
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
    "written_revision",
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
    are many enough, else one ``executemany``; a row holding a large text on its own
    (see the module), the rows around it in order."""
    copies = dialect.of(conn).copy_rows
    for insert_rows, rows in statements:
        if not insert_rows.texts or not holds_large_text(rows, insert_rows.texts):
            await _send(conn, insert_rows, rows, copies)
            continue
        waiting: list[tuple[Any, ...]] = []
        for row in rows:
            if not holds_large_text((row,), insert_rows.texts):
                waiting.append(row)
                continue
            if waiting:
                await _send(conn, insert_rows, waiting, copies)
                waiting = []
            if copies:
                await _copy_streamed(conn, insert_rows, row)
            else:
                await _insert_then_write(conn, insert_rows, row)
        if waiting:
            await _send(conn, insert_rows, waiting, copies)


async def _send(
    conn: AsyncConnection, insert_rows: DriverInsert, rows: list[tuple[Any, ...]], copies: bool
) -> None:
    if copies and len(rows) >= COPY_MIN_ROWS:
        await _copy(conn, insert_rows, rows)
    elif not copies and insert_rows.columns == MESSAGE_COLUMNS and len(rows) > 1:
        await _insert_together(conn, insert_rows, rows)
    else:
        await conn.exec_driver_sql(insert_rows.sql, rows)


_SEARCH_TEXT: Final = MESSAGE_COLUMNS.index("search_text")
STATEMENT_TEXT: Final = LARGE_TEXT
"""Characters of stored text at most in one multi-row message ``INSERT`` (SQLite)."""
KEPT_TEXT: Final = 1 << 16
"""Characters of stored text above which a multi-row ``INSERT`` is bound again with
nothing once done (SQLite keeps a cached statement's bound values until then)."""
_MAX_ROWS: Final = max(
    1, min(INSERT_CHUNK, (32766 if LIBRARY_VERSION >= (3, 32) else 999) // len(MESSAGE_COLUMNS))
)
"""Rows at most in one statement: within SQLite's bound parameters (32,766 since 3.32)."""


async def _insert_together(
    conn: AsyncConnection, insert_rows: DriverInsert, rows: list[tuple[Any, ...]]
) -> None:
    """Insert SQLite's message ``rows`` in as few statements as their size allows.

    One row a statement would cost the search index a flush a row: FTS5 writes what
    its insert trigger gathered to a new segment at every statement (an import of
    10,000 messages took 5 times as long one row a statement as in one statement a
    batch). The statement is an ``INSERT ... SELECT`` of its rows' ``VALUES`` and a
    condition, so that, once done, it can be bound again with nothing and the
    condition false, freeing the copies of its texts that SQLite keeps until then."""
    texts = (*insert_rows.texts, _SEARCH_TEXT)
    start = 0
    while start < len(rows):
        stop, size = start, 0
        while stop < len(rows) and stop - start < _MAX_ROWS:
            size += sum(len(rows[stop][index] or "") for index in texts)
            if size > STATEMENT_TEXT and stop > start:
                break
            stop += 1
        count, sql = stop - start, _rows_sql(insert_rows.sql, stop - start)
        await conn.exec_driver_sql(sql, (*_flat(rows[start:stop]), 1))
        if size > KEPT_TEXT:
            await conn.exec_driver_sql(sql, (None,) * (count * len(MESSAGE_COLUMNS)) + (0,))
        start = stop


@cache
def _rows_sql(sql: str, count: int) -> str:
    """``sql``, an ``INSERT`` of one row of ``?`` parameters, as an ``INSERT ... SELECT``
    of ``count`` rows and one condition (the last parameter)."""
    head, values = sql.rsplit(" VALUES ", 1)
    return f"{head} SELECT * FROM (VALUES {', '.join([values] * count)}) WHERE ?"


def _flat(rows: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
    return tuple(value for row in rows for value in row)


def holds_large_text(rows: Sequence[tuple[Any, ...]], texts: tuple[int, ...]) -> bool:
    """Whether a stored text of ``rows`` (at the indexes ``texts``) is a large one (a
    pass in C over each column: every append asks it)."""
    return any(max(map(len, map(itemgetter(index), rows))) > LARGE_TEXT for index in texts)


_WRITE_TEXTS = (
    update(MESSAGES)
    .where(
        MESSAGES.c.tenant == bindparam("b_tenant"),
        MESSAGES.c.session_id == bindparam("b_session_id"),
        MESSAGES.c.seq == bindparam("b_seq"),
    )
    .values(
        contents=bindparam("contents_json", type_=ENCODED),
        metadata=bindparam("metadata_json", type_=ENCODED),
    )
)
"""The ``UPDATE`` that writes the stored texts of one message row."""
_TEXTS_OF = {"contents_json": "contents_json", "metadata_json": "metadata_json"}
_KEY_OF = {"b_tenant": "tenant", "b_session_id": "session_id", "b_seq": "seq"}
_PLACEHOLDER = "null"
"""What a large row's texts are inserted as, until the ``UPDATE`` writes them."""


def _texts_update(dialect: Dialect) -> tuple[str, tuple[int, ...]]:
    """:data:`_WRITE_TEXTS` compiled for ``dialect``, and the index in a message row
    (:data:`MESSAGE_COLUMNS`) of each of its parameters, in the driver's order."""
    kept: dict[str, tuple[str, tuple[int, ...]]] = kept_on(dialect, "driver_inserts_texts", dict)
    found = kept.get("messages")
    if found is None:
        compiled = _WRITE_TEXTS.compile(dialect=dialect)
        where = {**_TEXTS_OF, **_KEY_OF}
        order = tuple(MESSAGE_COLUMNS.index(where[name]) for name in compiled.positiontup or ())
        found = kept["messages"] = (str(compiled), order)
    return found


async def _insert_then_write(
    conn: AsyncConnection, insert_rows: DriverInsert, row: tuple[Any, ...]
) -> None:
    """Insert message ``row`` with its texts as ``null``, write them with an ``UPDATE``,
    and bind that ``UPDATE`` again with nothing (it matches no row), so that the driver's
    cached statements keep no copy of the texts."""
    if insert_rows.columns != MESSAGE_COLUMNS:  # pragma: no cover - only messages hold texts
        raise RuntimeError(f"a large text in a row of {insert_rows.table}")
    placeholders = list(row)
    for index in insert_rows.texts:
        placeholders[index] = _PLACEHOLDER
    await conn.exec_driver_sql(insert_rows.sql, tuple(placeholders))
    sql, order = _texts_update(conn.dialect)
    await conn.exec_driver_sql(sql, tuple(row[index] for index in order))
    await conn.exec_driver_sql(sql, (None,) * len(order))


_COPY_ESCAPES = (("\\", "\\\\"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))
"""What ``COPY``'s text format escapes in a value (a backslash first)."""


def _copy_text(value: Any) -> str:
    """A driver value of a message row as ``COPY``'s text format writes it."""
    if value is None:
        return "\\N"
    if value is True or value is False:
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()  # ISO 8601 with its offset: read the same by any DateStyle
    if isinstance(value, str):
        text: str = value
        for plain, escaped in _COPY_ESCAPES:
            text = text.replace(plain, escaped)
        return text
    raise TypeError(f"no COPY text for a {type(value).__name__}")  # pragma: no cover


async def _row_text(row: tuple[Any, ...]) -> AsyncIterator[bytes]:
    """``row`` as one line of ``COPY``'s text format, in parts: each large text a slice
    of :data:`TEXT_SLICE` characters at a time."""
    line: list[str] = []
    for index, value in enumerate(row):
        if index:
            line.append("\t")
        if not isinstance(value, str) or len(value) <= LARGE_TEXT:
            line.append(_copy_text(value))
            continue
        yield "".join(line).encode()
        line = []
        for start in range(0, len(value), TEXT_SLICE):
            yield _copy_text(value[start : start + TEXT_SLICE]).encode()
    line.append("\n")
    yield "".join(line).encode()


async def _copy_streamed(
    conn: AsyncConnection, insert_rows: DriverInsert, row: tuple[Any, ...]
) -> None:
    """Send ``row`` by asyncpg's ``COPY`` in text format, its large texts in slices."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    with _driver_errors():
        await driver.copy_to_table(
            insert_rows.table,
            source=_row_text(row),
            columns=list(insert_rows.table_columns),
            format="text",
        )


async def _copy(
    conn: AsyncConnection, insert_rows: DriverInsert, rows: list[tuple[Any, ...]]
) -> None:
    """Send ``rows`` with the driver's ``COPY`` (asyncpg's binary protocol), in the
    connection's transaction."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    with _driver_errors():
        await driver.copy_records_to_table(
            insert_rows.table, records=rows, columns=list(insert_rows.table_columns)
        )


@contextmanager
def _driver_errors() -> Iterator[None]:
    """The driver's own errors of a ``COPY``, reported as a database failure."""
    try:
        yield
    except Exception as error:
        if isinstance(error, StoreError | asyncio.CancelledError):
            raise
        raise StoreError(f"database error: {error}") from error
