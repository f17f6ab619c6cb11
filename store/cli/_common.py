"""What every command shares: the common options, opening the store, output, errors.

Commands print a rich table for people, or with ``--json`` a JSON array of the API's
models (``model_dump(mode="json")``) on stdout. Failures are raised as
:class:`CliError` (or a :class:`~store.errors.ChatledgerError`) and turned into one line
on stderr and a non-zero exit by :func:`store.cli.main`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from sqlalchemy.exc import ArgumentError

from store.contract import HistoryBackend
from store.sql.engine import normalize_url, sqlite_file
from store.sql.store import HistoryStore

__all__ = [
    "TENANT_ENV",
    "URL_ENV",
    "CliError",
    "JsonOpt",
    "TenantOpt",
    "UrlOpt",
    "console",
    "describe_url",
    "emit_json",
    "err_console",
    "require_database",
    "run",
    "show_help",
    "with_store",
]

T = TypeVar("T")

TENANT_ENV = "CHATLEDGER_TENANT"
URL_ENV = "CHATLEDGER_URL"

UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar=URL_ENV,
        help="Database URL (sqlite:///path.db or postgresql://...). Default ./chatledger.db.",
        show_default=False,
    ),
]
TenantOpt = Annotated[
    str,
    typer.Option("--tenant", envvar=TENANT_ENV, help="Tenant whose sessions to read."),
]
JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print a JSON array of the API's models instead of a table."),
]

console = Console(highlight=False)
"""Where tables and reports go (stdout)."""
err_console = Console(stderr=True, highlight=False)
"""Where progress and warnings go (stderr)."""


class CliError(Exception):
    """A failure to report to the user as one line, with ``exit_code``."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def show_help(ctx: typer.Context) -> None:
    """Print the help of ``ctx``'s command on stderr and exit 2 (no subcommand given)."""
    sys.stderr.write(ctx.get_help() + "\n")
    raise typer.Exit(2)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Drive one of the async store's coroutines to completion."""
    return asyncio.run(coro)


def describe_url(url: str | None) -> str:
    """The URL as the user should see it (password hidden)."""
    try:
        return normalize_url(url).render_as_string(hide_password=True)
    except ArgumentError as error:
        raise CliError(f"invalid database URL {url!r}: {error}") from error


def require_database(url: str | None) -> None:
    """Refuse to read a SQLite file that does not exist (instead of creating it)."""
    try:
        database = sqlite_file(url)
    except ArgumentError as error:
        raise CliError(f"invalid database URL {url!r}: {error}") from error
    if database is not None and not Path(database).exists():
        raise CliError(
            f"no database at {database}: create one with `chatledger db upgrade --url ...` "
            "or `chatledger demo`"
        )


async def with_store(
    url: str | None,
    tenant: str,
    action: Callable[[HistoryBackend], Awaitable[T]],
) -> T:
    """Open the store on an existing database, run ``action`` on it, close it."""
    require_database(url)
    async with HistoryStore.open(url, tenant=tenant) as store:
        return await action(store)


def emit_json(models: Sequence[BaseModel] | Sequence[dict[str, Any]]) -> None:
    """Print ``models`` as one JSON array on stdout."""
    data = [m.model_dump(mode="json") if isinstance(m, BaseModel) else m for m in models]
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
