"""``chatledger db``: upgrade, current and check the database schema."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import BaseModel, ConfigDict

from store.cli._common import (
    CliError,
    JsonOpt,
    TenantOpt,
    UrlOpt,
    console,
    describe_url,
    emit_json,
    require_database,
    run,
    show_help,
)
from store.sql.engine import create_engine
from store.sql.migrations import current_revisions, head_revisions, migrate

__all__ = ["SchemaStatus", "db_app"]

db_app = typer.Typer(
    help="Manage the database schema (Alembic migrations).", invoke_without_command=True
)


@db_app.callback()
def _db(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        show_help(ctx)


class SchemaStatus(BaseModel):
    """Where a database's schema is, against the newest revision this version ships."""

    model_config = ConfigDict(frozen=True)

    url: str
    """The database (password hidden)."""
    current: tuple[str, ...]
    """The revision(s) the database is at; empty when chatledger was never installed."""
    head: tuple[str, ...]
    """The newest revision(s) this version of chatledger ships."""

    @property
    def up_to_date(self) -> bool:
        """Whether the database is at the newest revision."""
        return set(self.current) == set(self.head)

    def describe(self) -> str:
        """One line for people."""
        at = ", ".join(self.current) or "(none)"
        state = "up to date" if self.up_to_date else f"behind (head is {', '.join(self.head)})"
        return f"{self.url}: revision {at}, {state}"


async def _current(url: str | None) -> tuple[str, ...]:
    engine = create_engine(url)
    try:
        return await current_revisions(engine)
    finally:
        await engine.dispose()


def _status(url: str | None) -> SchemaStatus:
    return SchemaStatus(url=describe_url(url), current=run(_current(url)), head=head_revisions())


def _emit(status: SchemaStatus, as_json: bool) -> None:
    if as_json:
        emit_json([status.model_dump(mode="json") | {"up_to_date": status.up_to_date}])
    else:
        console.print(status.describe())


@db_app.command()
def upgrade(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
    as_json: JsonOpt = False,
) -> None:
    """Create or upgrade the schema to the newest revision (safe to run concurrently)."""
    del tenant  # the schema is shared by every tenant
    run(migrate(url, revision=revision))
    _emit(_status(url), as_json)


@db_app.command()
def current(url: UrlOpt = None, tenant: TenantOpt = "default", as_json: JsonOpt = False) -> None:
    """Print the revision the database is at."""
    del tenant
    require_database(url)
    _emit(_status(url), as_json)


@db_app.command()
def check(url: UrlOpt = None, tenant: TenantOpt = "default", as_json: JsonOpt = False) -> None:
    """Exit non-zero when the schema is not at the newest revision."""
    del tenant
    require_database(url)
    status = _status(url)
    if as_json or status.up_to_date:
        _emit(status, as_json)
    if not status.up_to_date:
        raise CliError(f"schema is behind: run `chatledger db upgrade` ({status.describe()})")
