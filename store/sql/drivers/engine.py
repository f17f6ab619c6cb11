"""Engines: URL resolution, driver mapping and the per-dialect connection setup.

* The URL comes from the argument, else the ``CHATLEDGER_URL`` environment variable,
  else ``sqlite:///./chatledger.db``; a plain path names a SQLite file. ``sqlite://``
  URLs use aiosqlite and ``postgresql://`` / ``postgres://`` URLs use asyncpg (a
  synchronous driver named in the URL is mapped to these; other databases and drivers
  are refused with the URL to use).
* SQLite: WAL journal, a busy timeout and foreign keys on every connection. The
  driver's own transaction handling is turned off and the store emits ``BEGIN``
  itself: ``BEGIN IMMEDIATE`` for write transactions (a deferred transaction that reads
  and then writes fails at once in WAL mode when another writer got there first,
  whatever the timeout), a plain deferred ``BEGIN`` for reads. Statements that cannot
  wait for a lock run on the event loop's thread, the others on aiosqlite's
  (:mod:`store.sql.drivers.sqlite`).
* PostgreSQL: asyncpg; an optional ``schema`` sets the ``search_path``. Directly or
  behind a pooler (the URL option ``pooler``, or the server's refusal of the startup
  parameters): :mod:`store.sql.drivers.poolers`.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util.concurrency import await_

from store.errors import InvalidInput, MigrationRequired, StoreError
from store.sql import dialect
from store.sql.drivers.asyncpg import PreparedAsyncEngine
from store.sql.drivers.poolers import (
    POOLER_OPTION,
    PoolerAwareDBAPI,
    Pooling,
    pooling_of,
    split_pooler_option,
)
from store.sql.drivers.sqlite import WRITE_OPTION, InlineAsyncEngine, OneHopAiosqliteDBAPI

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "SINGLE_READ_OPTION",
    "SUPPORTED_SCHEMES",
    "URL_ENV",
    "WRITE_OPTION",
    "begin_snapshot",
    "check_sqlite_path",
    "create_engine",
    "describe_url",
    "hold_snapshot",
    "normalize_url",
    "one_statement_writer",
    "read_connection",
    "resolve_url",
    "sqlite_file",
    "write_connection",
]

URL_ENV = "CHATLEDGER_URL"
DEFAULT_URL = "sqlite:///./chatledger.db"
SINGLE_READ_OPTION = "chatledger_single_read"
"""Connection execution option that makes SQLite begin no transaction: each statement
is its own snapshot until :func:`begin_snapshot` (see :func:`read_connection`)."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a call may wait for a lock (another writer, a transaction left open)."""

_ASYNC_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg"}
"""The driver chatledger uses for each database."""
_SYNC_DRIVERS = {
    "sqlite": ("pysqlite", "aiosqlite"),
    "postgresql": ("psycopg", "psycopg2", "psycopg2cffi", "pg8000", "asyncpg", "psycopg_async"),
}
"""Drivers named in a URL that are mapped to the async one (the URL means the same
database); any other driver is refused with the URL to use."""
SUPPORTED_SCHEMES = ("sqlite:///PATH", "postgresql://USER@HOST/DB", "a file path")


def resolve_url(url: str | URL | None) -> str | URL:
    """The URL to use: ``url``, else ``$CHATLEDGER_URL``, else :data:`DEFAULT_URL`."""
    if url is not None:
        return url
    return os.environ.get(URL_ENV) or DEFAULT_URL


SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
"""What a plain path to a SQLite file ends with (a path given instead of a URL)."""


def _looks_like_path(text: str) -> bool:
    return (
        text.lower().endswith(SQLITE_SUFFIXES)
        or text.startswith(("/", ".", "~"))
        or (os.sep in text or "/" in text)
    )


def _parse(text: str) -> URL:
    if "://" not in text:
        if _looks_like_path(text) and text.strip() == text and text:
            return URL.create("sqlite", database=os.path.expanduser(text))
        raise InvalidInput(
            f"invalid database URL {text!r}: expected sqlite:///PATH, "
            f"postgresql://USER@HOST/DB or a path to a SQLite file "
            f"({', '.join(SQLITE_SUFFIXES)})"
        )
    if text.startswith("postgres://"):
        text = "postgresql://" + text[len("postgres://") :]
    try:
        return make_url(text)
    except ArgumentError as error:
        raise InvalidInput(f"invalid database URL {text!r}: {error}") from None


def normalize_url(url: str | URL | None) -> URL:
    """Resolve ``url`` (a plain path is a SQLite file) and map it to the async driver.

    Raises :class:`~store.errors.InvalidInput` for a URL that cannot be parsed, a scheme
    other than SQLite and PostgreSQL, or a driver chatledger cannot map to its own.
    """
    resolved = resolve_url(url)
    if not isinstance(resolved, str | URL):
        raise InvalidInput(f"expected a database URL, got {type(resolved).__name__}")
    parsed = _parse(resolved) if isinstance(resolved, str) else resolved
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "postgres":
        backend = "postgresql"
    if backend not in _ASYNC_DRIVERS:
        raise InvalidInput(
            f"unsupported database {backend!r} in "
            f"{parsed.render_as_string(hide_password=True)!r}: chatledger supports "
            + ", ".join(SUPPORTED_SCHEMES)
        )
    if driver and driver not in _SYNC_DRIVERS[backend]:
        plain = parsed.set(drivername=backend).render_as_string(hide_password=True)
        raise InvalidInput(
            f"driver {driver!r} is not supported: chatledger uses "
            f"{_ASYNC_DRIVERS[backend]}; use {plain!r}"
        )
    return parsed.set(drivername=f"{backend}+{_ASYNC_DRIVERS[backend]}")


def describe_url(url: str | URL | None) -> str:
    """Where ``url`` points, as people should see it: the SQLite file, or the URL with
    its password hidden."""
    parsed = normalize_url(url)
    path = sqlite_file(parsed)
    if path is not None:
        return path
    plain = parsed.set(drivername=parsed.get_backend_name())
    return plain.render_as_string(hide_password=True)


def create_engine(
    url: str | URL | None = None,
    *,
    schema: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncEngine:
    """Create an async engine for ``url`` with chatledger's connection setup.

    ``timeout`` bounds each wait for a lock: SQLite's busy timeout, PostgreSQL's
    ``lock_timeout``, both set once per connection (no statement per call), or behind a
    transaction pooler in each transaction's ``BEGIN`` (no statement either).
    """
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout:
        raise InvalidInput(f"timeout must be a positive number of seconds, got {timeout!r}")
    parsed, pooling = split_pooler_option(normalize_url(url))
    sqlite = parsed.get_backend_name() == "sqlite"
    if pooling is not None and sqlite:
        raise InvalidInput(f"the URL option {POOLER_OPTION} is for PostgreSQL URLs only")
    wait_ms = max(1, int(timeout * 1000))
    options: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        settings = {"lock_timeout": str(wait_ms)}
        if schema:
            settings["search_path"] = schema
        options["module"] = PoolerAwareDBAPI(settings, pooling)  # see store.sql.drivers.poolers
    if sqlite and parsed.get_driver_name() == "aiosqlite":
        options["module"] = OneHopAiosqliteDBAPI()  # see store.sql.drivers.sqlite
    engine = create_async_engine(parsed, **options)
    if sqlite and "module" in options:  # connections that skip the greenlet where they can
        engine = InlineAsyncEngine(engine.sync_engine)
    elif parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "asyncpg":
        engine = PreparedAsyncEngine(engine.sync_engine)  # see store.sql.drivers.asyncpg
    if sqlite:
        configure_sqlite(engine, wait_ms)
    return engine


def sqlite_file(url: str | URL | None) -> str | None:
    """The file a SQLite URL names (None for another database, or an in-memory one)."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def check_sqlite_path(path: str, *, create: bool) -> None:
    """Refuse a SQLite path that cannot hold a database, naming the path and the fix.

    A directory, a missing file when nothing may be created, or a missing or read-only
    folder (SQLite in WAL mode writes ``<name>-wal`` and ``<name>-shm`` beside the
    database, so its folder must be writable even to read).
    """
    file = Path(path)
    folder = file.parent if str(file.parent) else Path(".")
    if file.is_dir():
        raise InvalidInput(f"{path} is a directory, not a SQLite database file")
    if not file.exists():
        if not create:
            raise MigrationRequired(
                f"no database at {path}: run `chatledger db upgrade --url {path}` to create it"
            )
        if not folder.is_dir():
            raise StoreError(f"cannot create {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise StoreError(
            f"the folder {folder} is read-only: SQLite (in WAL mode) writes "
            f"{file.name}-wal and {file.name}-shm beside {path}; make the folder writable"
        )


def _wal(cursor: Any, wait_ms: int) -> None:
    """Put the database in WAL mode. Switching takes the database to itself and does
    not wait on SQLite's busy handler, so several processes opening a new database at
    once retry here, within the timeout; a database in WAL already is left as it is."""
    deadline = time.monotonic() + wait_ms / 1000
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode")
            if str(cursor.fetchone()[0]).lower() == "wal":
                return
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() + delay > deadline:
                raise
        await_(asyncio.sleep(delay))  # the loop serves others meanwhile (a greenlet here)
        delay = min(delay * 2, 0.25)


_ZEROING = "chatledger_secure_delete"
"""Set in a SQLite connection's ``info`` once its writes zero what they free."""


def configure_sqlite(engine: AsyncEngine, wait_ms: int) -> None:
    """Install the SQLite connection pragmas and explicit ``BEGIN`` handling."""
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {wait_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            _wal(cursor, wait_ms)
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        if options.get(SINGLE_READ_OPTION, False):
            return
        if not options.get(WRITE_OPTION):
            connection.exec_driver_sql("BEGIN")
            return
        if not connection.info.get(_ZEROING):
            # every write zeroes what it frees, whatever the build's (or a connect
            # hook's) default: a row a write moves between pages leaves no copy of an
            # erased text behind; once a connection
            connection.exec_driver_sql("PRAGMA secure_delete = ON")
            connection.info[_ZEROING] = True
        connection.exec_driver_sql("BEGIN IMMEDIATE")


_WRITERS: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()
"""Each engine's view with the write option set (sharing its pool)."""
_READERS: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()
"""Each engine's view for reads (sharing its pool)."""
_SINGLE_READERS: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()
"""Each engine's view for reads that begin no transaction until asked to."""


def _reader(engine: AsyncEngine, *, single: bool = False) -> AsyncEngine | None:
    """The view of ``engine`` that reads (see :func:`read_connection`); None while that
    depends on what its first connection finds (a PostgreSQL server or a pooler)."""
    readers = _SINGLE_READERS if single else _READERS
    reader = readers.get(engine)
    if reader is None:
        if not dialect.capabilities(engine.dialect).snapshot_reads:
            pooling = pooling_of(engine.dialect)
            if pooling is None:
                return None
            if pooling is Pooling.TRANSACTION:
                reader = engine  # the settings come with each transaction's BEGIN
            else:
                reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        elif single:
            reader = engine.execution_options(**{SINGLE_READ_OPTION: True})
        else:
            reader = engine
        readers[engine] = reader
    return reader


_STATEMENT_WRITERS: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()


def one_statement_writer(engine: AsyncEngine) -> AsyncEngine | None:
    """The view of ``engine`` whose connections are in autocommit, for a write made in
    one statement (its own transaction) after reads that lock nothing; None where
    there is none: a database without data-modifying ``WITH`` queries (SQLite), behind
    a transaction pooler (the connection's settings come with a transaction's
    ``BEGIN``), or before the first connection tells which."""
    writer = _STATEMENT_WRITERS.get(engine)
    if writer is None:
        if not dialect.capabilities(engine.dialect).data_modifying_ctes:
            return None
        if pooling_of(engine.dialect) in (None, Pooling.TRANSACTION):
            return None
        writer = _STATEMENT_WRITERS[engine] = engine.execution_options(isolation_level="AUTOCOMMIT")
    return writer


@asynccontextmanager
async def read_connection(
    engine: AsyncEngine, *, single: bool = False
) -> AsyncIterator[AsyncConnection]:
    """A connection for reads only, with the fewest round trips that keep their meaning.

    Where a read transaction is one snapshot (SQLite in WAL mode) it is a plain
    connection: its first statement begins the transaction that keeps the snapshot;
    with ``single``, no transaction is begun, so each statement is its own snapshot,
    until :func:`begin_snapshot` begins the one that keeps the next statements
    together (for a read that is usually one statement: no ``BEGIN`` for it). Where
    each statement sees the latest commit anyway (PostgreSQL's read committed) it is
    in autocommit: the same reads without a ``BEGIN`` and a ``ROLLBACK``, each a round
    trip to the server; except behind a transaction pooler, where the connection's
    settings come with a transaction's ``BEGIN`` (:mod:`store.sql.drivers.poolers`).
    Never write on it.
    """
    reader = _reader(engine, single=single)
    if reader is not None:
        async with reader.connect() as conn:
            try:
                yield conn
            finally:
                await _let_go(conn)
        return
    async with engine.connect() as conn:  # the first connection tells how to read
        if pooling_of(engine.dialect) is not Pooling.TRANSACTION:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            yield conn
        finally:
            await _let_go(conn)


async def begin_snapshot(conn: AsyncConnection) -> bool:
    """Begin, on a ``single`` read connection (see :func:`read_connection`), the read
    transaction that keeps its next statements one snapshot; call it before any of
    them, once. False (nothing done) on any other connection."""
    sync = conn.sync_connection
    if sync is None or not sync.get_execution_options().get(SINGLE_READ_OPTION, False):
        return False
    await conn.exec_driver_sql("BEGIN")
    return True


_HELD = "chatledger_held_snapshot"
"""Connection info flag: :func:`hold_snapshot` began a transaction that
:func:`read_connection` ends."""


async def hold_snapshot(conn: AsyncConnection) -> bool:
    """Begin, on a read connection where each statement sees the latest commit
    (PostgreSQL in autocommit: see :func:`read_connection`), a read-only transaction at
    ``REPEATABLE READ``, so that its next statements see one snapshot; ended when
    :func:`read_connection` gives the connection back. For a read that finds its session
    moved by another writer: the reads after it then agree with the session row read
    first, and what they load can be cached at its key. False (nothing done) where
    reads are one snapshot already (SQLite), or on a connection in a transaction of its
    own (behind a transaction pooler)."""
    sync = conn.sync_connection
    if sync is None or dialect.of(conn).snapshot_reads or conn.info.get(_HELD):
        return False
    if sync.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
        return False
    await conn.exec_driver_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    conn.info[_HELD] = True
    return True


async def _let_go(conn: AsyncConnection) -> None:
    """End the transaction :func:`hold_snapshot` began on ``conn``, if it did (a
    connection that cannot end it is not given back to the pool)."""
    if conn.info.pop(_HELD, False):
        try:
            await conn.exec_driver_sql("ROLLBACK")
        except BaseException:
            await conn.invalidate()
            raise


@asynccontextmanager
async def write_connection(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection in a write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on exit."""
    writer = _WRITERS.get(engine)
    if writer is None:
        writer = _WRITERS[engine] = engine.execution_options(**{WRITE_OPTION: True})
    async with writer.connect() as conn, conn.begin():
        yield conn
