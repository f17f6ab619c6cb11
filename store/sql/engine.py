"""Engines: URL resolution, driver mapping and the per-dialect connection setup.

* The URL comes from the argument, else the ``CHATLEDGER_URL`` environment variable,
  else ``sqlite:///./chatledger.db``. ``sqlite://`` URLs use aiosqlite and
  ``postgresql://`` / ``postgres://`` URLs use asyncpg.
* SQLite: WAL journal, a busy timeout and foreign keys on every connection. The
  driver's own transaction handling is turned off and the store emits ``BEGIN``
  itself: ``BEGIN IMMEDIATE`` for write transactions (a deferred transaction that reads
  and then writes fails at once in WAL mode when another writer got there first,
  whatever the timeout), a plain deferred ``BEGIN`` for reads. Statements that cannot
  wait for a lock run on the event loop's thread, the others on aiosqlite's
  (:mod:`store.sql.sqlite_driver`).
* PostgreSQL: asyncpg; an optional ``schema`` sets the ``search_path``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from store.sql.sqlite_driver import OneHopAiosqliteDBAPI

__all__ = [
    "DEFAULT_URL",
    "URL_ENV",
    "WRITE_OPTION",
    "create_engine",
    "normalize_url",
    "resolve_url",
    "sqlite_file",
    "write_connection",
]

URL_ENV = "CHATLEDGER_URL"
DEFAULT_URL = "sqlite:///./chatledger.db"
WRITE_OPTION = "chatledger_write"
"""Connection execution option that makes SQLite begin with ``BEGIN IMMEDIATE``."""

SQLITE_BUSY_TIMEOUT_MS = 30_000

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "postgresql+psycopg": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
}


def resolve_url(url: str | URL | None) -> str | URL:
    """The URL to use: ``url``, else ``$CHATLEDGER_URL``, else :data:`DEFAULT_URL`."""
    if url is not None:
        return url
    return os.environ.get(URL_ENV) or DEFAULT_URL


def normalize_url(url: str | URL | None) -> URL:
    """Resolve ``url`` and map plain SQLite and PostgreSQL URLs to the async drivers."""
    resolved = resolve_url(url)
    if isinstance(resolved, str) and resolved.startswith("postgres://"):
        resolved = "postgresql://" + resolved[len("postgres://") :]
    parsed = make_url(resolved)
    driver = _DRIVERS.get(parsed.drivername)
    if driver is not None:
        parsed = parsed.set(drivername=driver)
    return parsed


def create_engine(url: str | URL | None = None, *, schema: str | None = None) -> AsyncEngine:
    """Create an async engine for ``url`` with chatledger's connection setup."""
    parsed = normalize_url(url)
    connect_args: dict[str, Any] = {}
    sqlite = parsed.get_backend_name() == "sqlite"
    if parsed.get_backend_name() == "postgresql" and schema:
        connect_args["server_settings"] = {"search_path": schema}
    options: dict[str, Any] = {}
    if sqlite and parsed.get_driver_name() == "aiosqlite":
        options["module"] = OneHopAiosqliteDBAPI()  # see store.sql.sqlite_driver
    engine = create_async_engine(parsed, connect_args=connect_args, **options)
    if sqlite:
        configure_sqlite(engine)
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


def configure_sqlite(engine: AsyncEngine) -> None:
    """Install the SQLite connection pragmas and explicit ``BEGIN`` handling."""
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        write = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


_WRITERS: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()
"""Each engine's view with the write option set (sharing its pool)."""


@asynccontextmanager
async def write_connection(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection in a write transaction (``BEGIN IMMEDIATE`` on SQLite), committed on exit."""
    writer = _WRITERS.get(engine)
    if writer is None:
        writer = _WRITERS[engine] = engine.execution_options(**{WRITE_OPTION: True})
    async with writer.connect() as conn, conn.begin():
        yield conn
