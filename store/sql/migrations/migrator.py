"""Alembic, driven from code: no ``alembic.ini`` needed.

The one module of the library that imports Alembic, and only when a schema is created,
upgraded or downgraded (:func:`store.sql.migrations.migrate` and the others load it
then): :func:`alembic_config` builds the configuration for the scripts
:func:`~store.sql.migrations.revisions.script_location` finds, :func:`run` applies revisions on an
open connection, and :func:`record_step`, which the migration environment calls after
each step, records every applied revision and its marker in
``chatledger_schema_revisions`` for the processes of older releases.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.script import Script
from alembic.script.revision import Revision
from sqlalchemy import delete, insert, inspect
from sqlalchemy.engine import URL, Connection

from store.sql.migrations.revisions import MARKER, script_location
from store.sql.schema import SCHEMA_REVISIONS

__all__ = ["alembic_config", "is_backward_compatible", "record_step", "run"]


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


def run(connection: Connection, revision: str, *, down: bool) -> None:
    """Upgrade (or, with ``down``, downgrade) the database of ``connection`` to
    ``revision``, in the connection's transaction."""
    config = alembic_config()
    config.attributes["connection"] = connection
    if down:
        command.downgrade(config, revision)
    else:
        command.upgrade(config, revision)


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
