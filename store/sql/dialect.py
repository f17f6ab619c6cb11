"""What SQLite and PostgreSQL do differently, as the named capabilities of one record.

Every difference between the two databases that the SQL backend relies on is a field
of :class:`Capabilities`; code asks :func:`capabilities` (or :func:`of` for a
connection) and never tests a dialect's name itself. Adding a dialect means adding one
record here.

==========================  ========  ==========  ==============================
capability                  SQLite    PostgreSQL  used by
==========================  ========  ==========  ==============================
``row_locks``               no        yes         locking the session row
``array_parameters``        no        yes         ``column = ANY(:ids)`` reads
``json_lists``              yes [1]_  no          a turn's views and write-back reads
``snapshot_reads``          yes       no          views, prefetch, history stream
``row_by_row_updates``      yes       no          the compaction write-back
``advisory_locks``          no        yes         serialized migrations
``schemas``                 no        yes         ``schema=`` / ``search_path``
``naive_timestamps``        yes       no          :class:`~store.sql.schema.UTCDateTime`
``planner_statistics``      no        yes         ``ANALYZE`` after bulk writes
``copy_rows``               no        yes         bulk appends by ``COPY``
``secure_delete``           yes       no          erasure: freed content zeroed
``wal_checkpoint``          yes       no          erasure: the log truncated
``vacuum_tables``           no        yes         ``VACUUM`` of the tables, not the file
``full_text``               FTS5      tsvector    :mod:`store.sql.search`
``data_modifying_ctes``     no        yes         an event written with its session row
==========================  ========  ==========  ==============================

.. [1] From SQLite 3.38, which always has ``json_each``.

What the store compiles for one dialect (inserts, pages of history, prepared
statements) is kept on the dialect itself (:func:`kept_on`), and goes with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import StoreError
from store.sql.drivers.sqlite_file import LIBRARY_VERSION as SQLITE_LIBRARY

__all__ = ["SUPPORTED", "Capabilities", "capabilities", "kept_on", "of"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """How one database behaves, in the terms the SQL backend needs."""

    name: str
    """The dialect's name, for messages."""
    row_locks: bool
    """``SELECT ... FOR UPDATE`` locks the session row of a write transaction. Without
    it (SQLite) the transaction already holds the database's write lock
    (``BEGIN IMMEDIATE``)."""
    array_parameters: bool
    """A set of keys is bound as one array (``= ANY(:ids)``). Without it, an expanding
    ``IN`` of at most :data:`~store.sql.statements.CHUNK` keys a statement. On
    PostgreSQL an ``IN`` of a chunk is planned as a scan of the whole session while the
    tables have no statistics yet, which done once per chunk made large change sets
    quadratic."""
    json_lists: bool
    """A set of keys can be bound as one JSON array text, read by ``json_each``: the
    statement stays the same whatever the number of keys, where an expanding ``IN`` is
    rendered again on every execution (most of a small read's cost in SQLAlchemy)."""
    snapshot_reads: bool
    """A read transaction sees one snapshot from its first read on (SQLite in WAL
    mode), so the session row read first describes every later read of the
    transaction. Without it (PostgreSQL's read committed) each statement sees the
    latest commit, and a read that must agree with the session row reads it again."""
    row_by_row_updates: bool
    """Updating many rows is cheapest as one ``executemany`` of single-row updates
    (SQLite runs the loop in C). Without it, one ``UPDATE ... = ANY(:ids)`` per
    distinct set of values."""
    advisory_locks: bool
    """``pg_advisory_xact_lock`` serializes migrations across processes. Without it the
    migration's write transaction (``BEGIN IMMEDIATE``) does."""
    schemas: bool
    """Tables may live in a named schema (``search_path``)."""
    naive_timestamps: bool
    """Timestamps are stored without an offset: UTC values are written naive."""
    copy_rows: bool
    """Many rows go fastest by the driver's ``COPY`` (asyncpg's binary protocol), rather
    than an ``executemany`` of ``INSERT``."""
    planner_statistics: bool
    """The planner needs ``ANALYZE``d tables to use the indexes for ``= ANY(:keys)``
    (PostgreSQL); SQLite's planner uses them without statistics."""
    loop_bound_connections: bool
    """A connection works only in the event loop it was made in, and cannot be closed
    from another (asyncpg's). aiosqlite's run in their own thread: any loop closes them."""
    secure_delete: bool
    """A transaction can ask the database to overwrite with zeros the content its
    deletes and updates free (``PRAGMA secure_delete``); PostgreSQL keeps dead row
    versions until ``VACUUM``, which never zeroes them."""
    wal_checkpoint: bool
    """Old page images stay in a write-ahead log file beside the database until a
    checkpoint copies it back and truncates it (``PRAGMA wal_checkpoint(TRUNCATE)``)."""
    vacuum_tables: bool
    """``VACUUM`` names tables and reclaims their dead rows in place (PostgreSQL);
    without it ``VACUUM`` rebuilds the whole database file (SQLite)."""
    alter_constraints: bool
    """``ALTER TABLE`` drops and adds a CHECK constraint (PostgreSQL); without it the
    constraint lives in the table's stored definition (SQLite), which a migration
    widens as SQLite's documentation describes (``writable_schema``)."""
    full_text: Literal["fts5", "tsvector"]
    """How messages are indexed for search: an FTS5 table over the messages' rows kept
    by triggers (SQLite), or a GIN index on ``to_tsvector('simple', ...)`` (PostgreSQL);
    :mod:`store.sql.search`."""
    data_modifying_ctes: bool
    """A statement's ``WITH`` may hold ``INSERT``s, each run to completion with it: a
    write of several tables is one round trip (PostgreSQL). SQLite has no round trips
    to save, and no such ``WITH``."""
    enforced_lengths: bool
    """A ``VARCHAR(n)`` column refuses a longer text (PostgreSQL); SQLite stores any
    length whatever the declared type."""
    insert: Callable[[Table], Any]
    """The dialect's ``INSERT`` construct (it has ``on_conflict_do_nothing``)."""


SUPPORTED: dict[str, Capabilities] = {
    "sqlite": Capabilities(
        name="sqlite",
        row_locks=False,
        array_parameters=False,
        json_lists=SQLITE_LIBRARY >= (3, 38, 0),
        snapshot_reads=True,
        row_by_row_updates=True,
        advisory_locks=False,
        schemas=False,
        naive_timestamps=True,
        copy_rows=False,
        planner_statistics=False,
        loop_bound_connections=False,
        secure_delete=True,
        wal_checkpoint=True,
        vacuum_tables=False,
        alter_constraints=False,
        full_text="fts5",
        data_modifying_ctes=False,
        enforced_lengths=False,
        insert=sqlite_insert,
    ),
    "postgresql": Capabilities(
        name="postgresql",
        row_locks=True,
        array_parameters=True,
        json_lists=False,
        snapshot_reads=False,
        row_by_row_updates=False,
        advisory_locks=True,
        schemas=True,
        naive_timestamps=False,
        copy_rows=True,
        planner_statistics=True,
        loop_bound_connections=True,
        secure_delete=False,
        wal_checkpoint=False,
        vacuum_tables=True,
        alter_constraints=True,
        full_text="tsvector",
        data_modifying_ctes=True,
        enforced_lengths=True,
        insert=postgresql_insert,
    ),
}
"""The capabilities of each supported dialect, by name."""


def capabilities(dialect: Dialect) -> Capabilities:
    """The capabilities of ``dialect``; :class:`~store.errors.StoreError` when unsupported."""
    found = SUPPORTED.get(dialect.name)
    if found is None:
        raise StoreError(
            f"unsupported database {dialect.name!r}: chatledger supports "
            + " and ".join(sorted(SUPPORTED))
        )
    return found


def of(conn: AsyncConnection) -> Capabilities:
    """The capabilities of the database ``conn`` is connected to."""
    return capabilities(conn.dialect)


_T = TypeVar("_T")


def kept_on(dialect: Dialect, name: str, factory: Callable[[], _T]) -> _T:
    """The cache ``name`` of what the store compiled for ``dialect`` (made by ``factory``
    the first time), kept on the dialect itself so that it goes when the dialect goes.

    Kept anywhere else, keyed by the dialect (even weakly), such a cache would keep
    every dialect alive: what it holds (bind processors) refers back to the dialect,
    and a store opened and closed again and again kept each one's dialect and caches,
    about 80 kB a store."""
    kept: dict[str, Any] = vars(dialect).setdefault("_chatledger_kept", {})
    found = kept.get(name)
    if found is None:
        found = kept[name] = factory()
    return found
