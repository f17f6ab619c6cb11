"""Alembic environment for chatledger (async).

Two ways in:

* from the command line (``alembic -c alembic.ini upgrade head`` or ``chatledger db
  upgrade``): an async engine is created from the configured URL and the migrations run
  through ``connection.run_sync``;
* from :func:`store.sql.migrations.migrate`, which runs inside an already running event
  loop: it passes an open synchronous connection in ``config.attributes["connection"]``
  and the migrations run on it directly.

Only ``chatledger_`` tables are compared or touched, so the host application's own
tables (and its own Alembic history) sharing the database are left alone. SQLite runs in
batch mode, and the version table is ``chatledger_alembic_version``. After each step,
the applied revision and its ``backward_compatible`` marker are recorded in
``chatledger_schema_revisions`` (see ``store/sql/migrations/migrator.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from store.sql.drivers.engine import create_engine
from store.sql.migrations.migrator import record_step
from store.sql.schema import TABLE_PREFIX, metadata
from store.sql.search.index import INDEX_OBJECTS

VERSION_TABLE = "chatledger_alembic_version"

config = context.config
target_metadata = metadata


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Only chatledger's own tables (and what belongs to them) take part; the search
    index's objects (made by :mod:`store.sql.search.index`, not by the metadata) stay
    out of the comparison."""
    if name is not None and str(name).startswith(INDEX_OBJECTS):
        return False
    if type_ == "table":
        return bool(name) and str(name).startswith(TABLE_PREFIX)
    table = getattr(obj, "table", None)
    if table is not None:
        return str(table.name).startswith(TABLE_PREFIX)
    return True


def _configure(connection: Connection | None = None, **extra: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=include_object,
        version_table=VERSION_TABLE,
        render_as_batch=True,
        compare_type=True,
        on_version_apply=record_step,
        **extra,
    )


def do_run_migrations(connection: Connection) -> None:
    """Run the migrations on an open synchronous connection."""
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def run_async_migrations() -> None:
    """Create an async engine from the configuration and migrate through it."""
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(do_run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    """Emit the migrations as SQL (``alembic upgrade --sql``)."""
    url = config.get_main_option("sqlalchemy.url")
    _configure(url=url, literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate on the passed connection, or on a fresh engine's."""
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
    else:
        asyncio.run(run_async_migrations())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
