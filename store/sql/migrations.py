"""Schema migrations, driven from code: no ``alembic.ini`` needed.

The Alembic scripts ship inside the wheel as ``store/_migrations`` (found with
:mod:`importlib.resources`); in a source checkout (editable install) the repository's
``migrations/`` directory is used instead. :func:`migrate` upgrades a database to the
newest revision, from inside a running event loop, serialized against other processes
doing the same (a transaction-scoped advisory lock on PostgreSQL, a ``BEGIN IMMEDIATE``
transaction on SQLite). :func:`ensure_schema` is what opening a store does: create the
schema on an empty database, and refuse (:class:`~store.errors.MigrationRequired`) a
database whose schema is behind unless asked to upgrade it.

A rolling deploy runs two releases against one database: the newer one upgrades it,
the older one must keep working. Each revision script says whether it allows that with
a module attribute, the *marker*::

    backward_compatible: bool = True  # the previous head's code keeps working on this one

(absent means False). The marker only helps a process that can read it, and that
process lacks the newer script, so the migration environment records every applied
revision, its parent and its marker in ``chatledger_schema_revisions``
(:func:`record_step`). A database at a revision this library does not ship is then
accepted when a chain of revisions marked backward-compatible leads from it down to
this library's head (:func:`compatible_ahead`); otherwise it is refused as made by a
newer chatledger.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.script import Script, ScriptDirectory
from alembic.script.revision import Revision
from sqlalchemy import delete, insert, inspect, select, text
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
from store.sql.schema import SCHEMA_REVISIONS

__all__ = [
    "MARKER",
    "VERSION_TABLE",
    "Mark",
    "SchemaState",
    "alembic_config",
    "check_revisions",
    "check_sqlite_file",
    "compatible_ahead",
    "create_schema",
    "current_revisions",
    "downgrade",
    "ensure_schema",
    "head_revisions",
    "known_revisions",
    "migrate",
    "migrate_sync",
    "record_step",
    "revision_history",
    "schema_marks",
    "schema_state",
    "script_location",
    "sqlite_marks",
    "sqlite_revisions",
    "unknown_revisions",
]

VERSION_TABLE = "chatledger_alembic_version"
ADVISORY_LOCK_KEY = 0x63686C6467  # "chldg": serializes chatledger migrations on PostgreSQL
MARKER = "backward_compatible"
"""The name of a revision script's backward-compatibility marker (a module attribute)."""
UPGRADE_HINT = "run `chatledger db upgrade` (or open the store with upgrade=True)"


def script_location() -> Path:
    """Where the Alembic scripts are: the packaged copy, else the repository's."""
    packaged = resources.files("store").joinpath("_migrations")
    if packaged.is_dir() and packaged.joinpath("env.py").is_file():
        return Path(str(packaged))
    repository = Path(__file__).resolve().parents[2] / "migrations"
    if (repository / "env.py").is_file():
        return repository
    raise MigrationRequired("chatledger's migration scripts are missing from the installation")


def alembic_config(url: str | URL | None = None) -> Config:
    """An Alembic configuration for chatledger's scripts, built in code."""
    location = script_location()
    config = Config()
    config.set_main_option("path_separator", "os")
    config.set_main_option("script_location", str(location))
    config.set_main_option("version_locations", str(location / "versions"))
    if url is not None:
        config.attributes["url"] = url
        if isinstance(url, str):
            config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@functools.cache
def head_revisions() -> tuple[str, ...]:
    """The newest revision(s) this library ships."""
    return tuple(ScriptDirectory.from_config(alembic_config()).get_heads())


@functools.cache
def known_revisions() -> frozenset[str]:
    """Every revision this library ships."""
    scripts = ScriptDirectory.from_config(alembic_config())
    return frozenset(script.revision for script in scripts.walk_revisions())


@dataclass(frozen=True)
class Mark:
    """What the database records of one applied revision."""

    down_revision: str | None
    backward_compatible: bool


Marks = dict[str, Mark]
"""Applied revisions' records, by revision."""


def is_backward_compatible(script: Revision) -> bool:
    """The revision script's marker (False when it has none)."""
    module = script.module if isinstance(script, Script) else None
    return getattr(module, MARKER, False) is True


def record_step(
    ctx: MigrationContext, *, step: MigrationInfo, heads: set[str], run_args: dict[str, object]
) -> None:
    """Record (or, on a downgrade, forget) one applied revision and its marker in
    ``chatledger_schema_revisions``; Alembic calls it after each step (the environment's
    ``on_version_apply``). Nothing is recorded before the revision creating the table."""
    connection = ctx.connection
    if ctx.as_sql or connection is None or not inspect(connection).has_table(SCHEMA_REVISIONS.name):
        return
    for revision in step.up_revision_ids:
        connection.execute(delete(SCHEMA_REVISIONS).where(SCHEMA_REVISIONS.c.revision == revision))
    if not step.is_upgrade:
        return
    script = step.up_revision
    parents = step.down_revision_ids
    if script is None:
        return
    connection.execute(
        insert(SCHEMA_REVISIONS).values(
            revision=script.revision,
            down_revision=parents[0] if len(parents) == 1 else None,
            backward_compatible=is_backward_compatible(script),
        )
    )


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


def compatible_ahead(revision: str, marks: Marks) -> bool:
    """Whether this library keeps working against a database at ``revision``, which it
    does not ship: a chain of revisions marked backward-compatible leads from it down to
    this library's head."""
    seen: set[str] = set()
    while revision not in known_revisions():
        mark = marks.get(revision)
        if mark is None or not mark.backward_compatible or mark.down_revision is None:
            return False
        if revision in seen:
            return False
        seen.add(revision)
        revision = mark.down_revision
    return revision in head_revisions()


def _current(connection: Connection) -> tuple[str, ...]:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return tuple(context.get_current_heads())


def _run(connection: Connection, revision: str, *, down: bool) -> None:
    check_revisions(_current(connection), describe_url(connection.engine.url), create=True)
    config = alembic_config()
    config.attributes["connection"] = connection
    if down:
        command.downgrade(config, revision)
    else:
        command.upgrade(config, revision)


async def current_revisions(engine: AsyncEngine) -> tuple[str, ...]:
    """The revision(s) the database is at (empty when chatledger was never installed)."""
    with translate_errors():
        async with engine.connect() as conn:
            return await conn.run_sync(_current)


async def _migrate_engine(engine: AsyncEngine, revision: str, *, down: bool = False) -> None:
    with translate_errors():
        async with write_connection(engine) as conn:
            if dialect.of(conn).advisory_locks:
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY}
                )
            await conn.run_sync(_run, revision, down=down)


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


def unknown_revisions(current: tuple[str, ...]) -> list[str]:
    """The revisions of ``current`` this library does not ship."""
    return [r for r in current if r not in known_revisions()]


def check_revisions(
    current: tuple[str, ...], where: str, *, create: bool, marks: Marks | None = None
) -> bool:
    """Whether a database at ``current`` needs migrating; refuse what this library cannot
    use: no schema when nothing may be created, or a revision it does not know (a newer
    chatledger made the database) unless ``marks`` show it backward-compatible with
    this library's head (:func:`compatible_ahead`), in which case nothing is migrated."""
    unknown = unknown_revisions(current)
    if unknown and all(compatible_ahead(r, marks or {}) for r in unknown):
        return False
    if unknown:
        raise MigrationRequired(
            f"the database at {where} was created by a newer chatledger (revision "
            f"{', '.join(unknown)}); upgrade the package (pip install -U chatledger)"
        )
    if not current and not create:
        raise MigrationRequired(
            f"no chatledger schema in {where}: run `chatledger db upgrade` to create it"
        )
    return set(current) != set(head_revisions())


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


def revision_history() -> list[dict[str, str | None]]:
    """The revisions this version ships, oldest first: id, parent and description."""
    scripts = ScriptDirectory.from_config(alembic_config())
    return [
        {
            "revision": script.revision,
            "down_revision": str(script.down_revision) if script.down_revision else None,
            "description": (script.doc or "").strip().splitlines()[0] if script.doc else "",
        }
        for script in reversed(list(scripts.walk_revisions()))
    ]
