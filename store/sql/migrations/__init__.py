"""The database's schema: where it is, the check on open, and moving it.

:func:`ensure_schema` is what opening a store does: create the schema on an empty
database, and refuse (:class:`~store.errors.MigrationRequired`) a database whose schema
is behind unless asked to upgrade it, or one a newer chatledger made that is not marked
compatible with this one (the rule is :func:`~store.sql.migrations.revisions.check_revisions`).
:func:`check_sqlite_file` makes the same check on a SQLite file before a store opens it.
Both read the revision the database records with one query, and compare it with the
revisions this library ships (:mod:`store.sql.migrations.revisions`), without Alembic.

:func:`migrate` upgrades a database to the newest revision, from inside a running event
loop, serialized against other processes doing the same (a transaction-scoped advisory
lock on PostgreSQL, a ``BEGIN IMMEDIATE`` transaction on SQLite); :func:`downgrade`
goes back. Alembic (:mod:`store.sql.migrations.migrator`) is imported when a schema is created,
upgraded or downgraded, never to open a store on a database that is current.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import column, inspect, select, table, text
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from store.errors import MigrationRequired
from store.sql import dialect
from store.sql.drivers.engine import (
    DEFAULT_TIMEOUT,
    check_sqlite_path,
    create_engine,
    describe_url,
    normalize_url,
    sqlite_file,
    write_connection,
)
from store.sql.drivers.sqlite_file import read_table
from store.sql.errors import translate_errors
from store.sql.migrations.revisions import (
    Mark,
    Marks,
    check_revisions,
    compatible_ahead,
    head_revisions,
    known_revisions,
    unknown_revisions,
)
from store.sql.schema import SCHEMA_REVISIONS

__all__ = [
    "VERSION_TABLE",
    "SchemaState",
    "check_sqlite_file",
    "create_schema",
    "current_revisions",
    "downgrade",
    "ensure_schema",
    "migrate",
    "migrate_sync",
    "schema_marks",
    "schema_state",
    "sqlite_marks",
    "sqlite_revisions",
    "stored_revisions",
]

VERSION_TABLE = "chatledger_alembic_version"
"""Where the database records its revision(s) (Alembic's version table, renamed)."""
ADVISORY_LOCK_KEY = 0x63686C6467  # "chldg": serializes chatledger migrations on PostgreSQL
UPGRADE_HINT = "run `chatledger db upgrade` (or open the store with upgrade=True)"

_VERSIONS = table(VERSION_TABLE, column("version_num"))


def stored_revisions(connection: Connection) -> tuple[str, ...]:
    """The revision(s) the database of ``connection`` records (empty when chatledger was
    never installed there), read as Alembic reads them."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return ()
    return tuple(str(r) for r in connection.execute(select(_VERSIONS.c.version_num)).scalars())


def _marks(connection: Connection) -> Marks:
    if not inspect(connection).has_table(SCHEMA_REVISIONS.name):
        return {}
    rows = connection.execute(select(SCHEMA_REVISIONS)).mappings()
    return {r["revision"]: Mark(r["down_revision"], bool(r["backward_compatible"])) for r in rows}


async def schema_marks(engine: AsyncEngine) -> Marks:
    """The applied revisions the database records, with their markers."""
    with translate_errors():
        async with engine.connect() as conn:
            return await conn.run_sync(_marks)


async def current_revisions(engine: AsyncEngine) -> tuple[str, ...]:
    """The revision(s) the database is at (empty when chatledger was never installed)."""
    with translate_errors():
        async with engine.connect() as conn:
            return await conn.run_sync(stored_revisions)


async def _migrate_engine(engine: AsyncEngine, revision: str, *, down: bool = False) -> None:
    # Alembic loads here, when the schema moves, and before the lock is taken
    from store.sql.migrations.migrator import run

    def step(connection: Connection) -> None:
        where = describe_url(connection.engine.url)
        check_revisions(stored_revisions(connection), where, create=True)
        run(connection, revision, down=down)

    with translate_errors():
        async with write_connection(engine) as conn:
            if dialect.of(conn).advisory_locks:
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY}
                )
            await conn.run_sync(step)


async def migrate(
    url: str | URL | AsyncEngine | None = None,
    *,
    revision: str = "head",
    schema: str | None = None,
) -> None:
    """Upgrade the database at ``url`` (or an engine) to ``revision``; safe to run concurrently."""
    if isinstance(url, AsyncEngine):
        await _migrate_engine(url, revision)
        return
    await _check_file(url, create=True)
    engine = create_engine(url, schema=schema)
    try:
        await create_schema(engine, schema)
        await _migrate_engine(engine, revision)
    finally:
        await engine.dispose()


async def _check_file(url: str | URL | None, *, create: bool) -> None:
    """Refuse a SQLite path that cannot hold the database (a directory, a missing
    folder, a file that is not a database) in words that name it, before SQLite does."""
    path = sqlite_file(url)
    if path is not None:
        await asyncio.to_thread(check_sqlite_file, path, create=create)


def migrate_sync(url: str | URL | None = None, *, revision: str = "head") -> None:
    """:func:`migrate` for callers without an event loop (the CLI)."""
    asyncio.run(migrate(url, revision=revision))


async def downgrade(url: str | URL | AsyncEngine | None = None, *, revision: str = "base") -> None:
    """Downgrade the database to ``revision`` (``base`` drops every chatledger table)."""
    if isinstance(url, AsyncEngine):
        await _migrate_engine(url, revision, down=True)
        return
    await _check_file(url, create=False)
    engine = create_engine(url)
    try:
        await _migrate_engine(engine, revision, down=True)
    finally:
        await engine.dispose()


async def create_schema(engine: AsyncEngine, schema: str | None) -> None:
    """Create the PostgreSQL schema ``schema`` when it does not exist (no-op otherwise)."""
    if not schema or not dialect.capabilities(engine.dialect).schemas:
        return
    quoted = engine.dialect.identifier_preparer.quote_identifier(schema)
    with translate_errors():
        async with engine.begin() as conn:
            await conn.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY}
            )
            await conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {quoted}"))


async def ensure_schema(
    engine: AsyncEngine,
    *,
    upgrade: bool = False,
    create: bool = True,
    schema: str | None = None,
) -> None:
    """Make sure the schema is current: create it when absent (unless ``create`` is
    false), upgrade it if asked.

    Raises :class:`MigrationRequired` when the schema is absent and ``create`` is false,
    behind and ``upgrade`` is false, or at a revision this library does not know and
    that is not marked backward-compatible with its head (a database one compatible
    revision ahead is used as it is, even with ``upgrade``).
    """
    current = await current_revisions(engine)
    marks = await schema_marks(engine) if unknown_revisions(current) else None
    if not check_revisions(current, describe_url(engine.url), create=create, marks=marks):
        return
    if not current or upgrade:
        await create_schema(engine, schema)
        await _migrate_engine(engine, "head")
        return
    raise MigrationRequired(
        f"the database schema is at revision {', '.join(current)}, "
        f"this version of chatledger needs {', '.join(head_revisions())}: {UPGRADE_HINT}"
    )


def check_sqlite_file(path: str, *, create: bool, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Refuse a SQLite file a store cannot open (see
    :func:`~store.sql.drivers.engine.check_sqlite_path`), one that is not a database, or one at
    a revision this library cannot use, before anything is written to it. A file
    another process keeps locked past ``timeout`` seconds raises
    :class:`~store.errors.StoreTimeout`."""
    check_sqlite_path(path, create=create)
    if Path(path).exists():
        current = sqlite_revisions(path, timeout=timeout)
        marks = sqlite_marks(path, timeout=timeout) if unknown_revisions(current) else None
        check_revisions(current, path, create=create, marks=marks)


def sqlite_revisions(path: str, *, timeout: float = DEFAULT_TIMEOUT) -> tuple[str, ...]:
    """The chatledger revisions recorded in the SQLite file at ``path`` (empty when it
    has no chatledger schema), read without writing anything to it."""
    rows = read_table(path, VERSION_TABLE, "version_num", timeout=timeout)
    return tuple(str(row[0]) for row in rows)


def sqlite_marks(path: str, *, timeout: float = DEFAULT_TIMEOUT) -> Marks:
    """:func:`schema_marks` of the SQLite file at ``path``, read without writing to it."""
    columns = "revision, down_revision, backward_compatible"
    rows = read_table(path, SCHEMA_REVISIONS.name, columns, timeout=timeout)
    return {str(r[0]): Mark(None if r[1] is None else str(r[1]), bool(r[2])) for r in rows}


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema is, against the newest revision this version ships."""

    where: str
    """The database, as people should see it (a SQLite file, or the URL without password)."""
    current: tuple[str, ...]
    """The revision(s) the database is at; empty when it holds no chatledger schema."""
    head: tuple[str, ...]
    """The newest revision(s) this version of chatledger ships."""
    compatible: bool = False
    """Whether a newer chatledger made the database with revisions marked
    backward-compatible down to :attr:`head`: this version keeps working with it."""

    @property
    def up_to_date(self) -> bool:
        """Whether the database is at the newest revision."""
        return set(self.current) == set(self.head)

    @property
    def newer(self) -> bool:
        """Whether a newer chatledger made the database (a revision this one lacks)."""
        return any(r not in known_revisions() for r in self.current)

    def describe(self) -> str:
        """One line for people."""
        if not self.current:
            return f"{self.where}: no chatledger schema (run `chatledger db upgrade`)"
        at = ", ".join(self.current)
        if self.up_to_date:
            return f"{self.where}: revision {at}, up to date"
        if self.newer and self.compatible:
            return (
                f"{self.where}: revision {at}, made by a newer chatledger, compatible with this one"
            )
        if self.newer:
            return f"{self.where}: revision {at}, made by a newer chatledger (upgrade the package)"
        return f"{self.where}: revision {at}, behind (head is {', '.join(self.head)})"

    def as_json(self) -> dict[str, object]:
        """The ``db current --json`` object."""
        return {
            "url": self.where,
            "current": list(self.current),
            "head": list(self.head),
            "up_to_date": self.up_to_date,
        }


async def schema_state(url: str | URL | None = None) -> SchemaState:
    """Where the schema of the database at ``url`` is, read without writing anything (a
    SQLite file that does not exist is refused rather than created)."""
    with translate_errors():
        target = normalize_url(url)
        where = describe_url(target)
        path = sqlite_file(target)
        if path is not None:
            check_sqlite_path(path, create=False)
            current = await asyncio.to_thread(sqlite_revisions, path)
            newer = unknown_revisions(current)
            marks = await asyncio.to_thread(sqlite_marks, path) if newer else {}
        else:
            engine = create_engine(target)
            try:
                current = await current_revisions(engine)
                newer = unknown_revisions(current)
                marks = await schema_marks(engine) if newer else {}
            finally:
                await engine.dispose()
    compatible = bool(newer) and all(compatible_ahead(r, marks) for r in newer)
    return SchemaState(where=where, current=current, head=head_revisions(), compatible=compatible)
