"""``chatledger db``: create, upgrade, downgrade and inspect the database schema.

The schema is shared by every tenant, so no ``db`` command takes ``--tenant``. Only
``upgrade`` creates tables; ``current``, ``check`` and ``history`` read (a SQLite file
is read without being written, even its journal mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from store.cli._common import CliError, emit_json, json_option, run, url_option
from store.cli._output import Column, Table, echo, print_table

if TYPE_CHECKING:
    from store.sql.migrations import SchemaState

__all__ = ["db"]


@click.group()
def db() -> None:
    """Create, upgrade and inspect the database schema."""


def _progress() -> None:
    """Print the search index's fill progress (a line a batch) on stderr."""
    import logging

    log = logging.getLogger("chatledger.search")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("chatledger: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def _revisions(names: list[str]) -> str:
    """``revision 0006 is`` or ``revisions 0006, 0007 are``."""
    if len(names) == 1:
        return f"revision {names[0]} is"
    return f"revisions {', '.join(names)} are"


def _state(url: str | None) -> SchemaState:
    from store.sql.migrations import schema_state

    return run(schema_state(url))


def _emit(state: SchemaState, as_json: bool) -> None:
    if as_json:
        emit_json(state.as_json())
    else:
        echo(state.describe())


@db.command()
@click.argument("revision", default="head", metavar="[REVISION]")
@click.option(
    "--revision",
    "old_revision",
    metavar="REVISION",
    hidden=True,
    help="Deprecated: give the revision as an argument.",
)
@url_option
@json_option
def upgrade(revision: str, old_revision: str | None, url: str | None, as_json: bool) -> None:
    """Create the schema, or upgrade it to REVISION (default head); safe to run
    concurrently."""
    from store.errors import MigrationRequired
    from store.sql.migrations import migrate
    from store.sql.migrations.revisions import incompatible_between

    if old_revision is not None:
        echo(
            "chatledger: warning: --revision is deprecated, give the revision as an "
            "argument: chatledger db upgrade REVISION",
            err=True,
        )
        if revision != "head":
            raise CliError("give the revision once, as an argument", exit_code=2)
        revision = old_revision
    try:
        before = _state(url).current
    except MigrationRequired:  # no database yet: nothing ran against it before
        before = ()
    _progress()
    run(migrate(url, revision=revision))
    breaking = incompatible_between(before, revision)
    if breaking:
        echo(
            f"chatledger: {_revisions(breaking)} not backward compatible: a "
            "process of an earlier chatledger release cannot use this database now. "
            "Deploy order: stop the processes of the earlier release, upgrade the "
            "database (done), then start the processes of this release.",
            err=True,
        )
    _emit(_state(url), as_json)


@db.command()
@click.argument("revision", metavar="REVISION")
@url_option
@json_option
def downgrade(revision: str, url: str | None, as_json: bool) -> None:
    """Downgrade the schema to REVISION ('base' drops every chatledger table)."""
    from store.sql.migrations import downgrade as run_downgrade

    state = _state(url)
    if not state.current:
        raise CliError(f"no chatledger schema in {state.where}: nothing to downgrade")
    run(run_downgrade(url, revision=revision))
    _emit(_state(url), as_json)


@db.command()
@url_option
@json_option
def current(url: str | None, as_json: bool) -> None:
    """Print the revision the database is at."""
    _emit(_state(url), as_json)


@db.command()
@url_option
@json_option
def check(url: str | None, as_json: bool) -> None:
    """Exit 1 unless the schema is at the newest revision this version ships."""
    state = _state(url)
    if as_json or state.up_to_date:
        _emit(state, as_json)
    if not state.up_to_date:
        raise CliError(f"schema is not current: {state.describe()}")


@db.command()
@url_option
@json_option
def history(url: str | None, as_json: bool) -> None:
    """List the schema revisions this version ships, oldest first (marking the
    database's with --url)."""
    from store.sql.migrations.revisions import revision_history

    current_revisions: tuple[str, ...] = _state(url).current if url is not None else ()
    revisions = revision_history()
    if as_json:
        emit_json([{**r, "current": r["revision"] in current_revisions} for r in revisions])
        return
    table = Table(
        "Schema revisions, oldest first",
        [Column("revision"), Column("db"), Column("description", flex=True)],
    )
    for entry in revisions:
        mark = "*" if entry["revision"] in current_revisions else ""
        table.add(str(entry["revision"]), mark, str(entry["description"]))
    print_table(table, empty="No revisions.")
    if url is not None:
        echo("(* the revision the database is at)")


@db.command("search")
@click.argument("state", type=click.Choice(["on", "off"]), metavar="on|off")
@url_option
@json_option
def search_switch(state: str, url: str | None, as_json: bool) -> None:
    """Turn full-text search on (index every message; the default) or off (drop the
    index: `search` then says so). Running processes see it when they reopen."""
    from store.cli._common import open_store
    from store.contract import DEFAULT_TENANT
    from store.sql.search.index import switch_search
    from store.sql.store import HistoryStore

    async def action(store: object) -> int:
        assert isinstance(store, HistoryStore)
        return await switch_search(store.engine, state == "on")

    _progress()
    filled = run(open_store(url, DEFAULT_TENANT, action))
    if as_json:
        emit_json({"search": state, "filled": filled})
        return
    if state == "on":
        echo(f"search is on: the index covers every message ({filled:,} filled now)")
    else:
        echo("search is off: the index is dropped; `chatledger db search on` builds it again")
