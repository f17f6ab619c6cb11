"""The ``chatledger`` command line.

::

    chatledger sessions                      the tenant's sessions
    chatledger show SESSION [--all|--context] stored messages, or what the model is sent
    chatledger audit [SESSION] [--since ...] compaction events
    chatledger stats [SESSION]               stored versus active counts
    chatledger db upgrade|current|check      the schema
    chatledger demo [--turns N]              a long, tool-heavy scripted conversation

Every command takes ``--url`` and ``--tenant`` after its name (or ``CHATLEDGER_URL`` and
``CHATLEDGER_TENANT``) and, where it prints results, ``--json`` for a JSON array of the
API's models. Errors are one line on stderr and a non-zero exit (1 for failures, 2 for
usage errors); ``CHATLEDGER_DEBUG=1`` adds the traceback of unexpected errors.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import typer
from sqlalchemy.exc import ArgumentError
from typer.exceptions import Abort, TyperException

from store.cli._common import CliError, show_help
from store.cli._db import db_app
from store.cli._demo import demo
from store.cli._read import audit, sessions, show, stats
from store.errors import ChatledgerError

__all__ = ["app", "main"]

DEBUG_ENV = "CHATLEDGER_DEBUG"

app = typer.Typer(
    name="chatledger",
    help="chatledger: a persistent chat-history store for LLM agents, in SQL.",
    invoke_without_command=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        show_help(ctx)


app.command()(sessions)
app.command()(show)
app.command()(audit)
app.command()(stats)
app.command()(demo)
app.add_typer(db_app, name="db")


@app.command()
def version() -> None:
    """Print the installed version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        typer.echo(_version("chatledger"))
    except PackageNotFoundError:
        raise CliError("chatledger is not installed (no package metadata)") from None


def _fail(message: str, code: int) -> NoReturn:
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    sys.stderr.write(f"chatledger: error: {first}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _unexpected(error: BaseException) -> NoReturn:
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        traceback.print_exception(error, file=sys.stderr)
    else:
        sys.stderr.write(
            f"chatledger: unexpected error: {type(error).__name__}: {error} "
            f"(set {DEBUG_ENV}=1 for the traceback)\n"
        )
    raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point: run the CLI and turn every failure into one line."""
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name="chatledger", standalone_mode=False)
    except TyperException as error:  # usage errors: unknown command, bad option value
        _fail(error.format_message(), error.exit_code)
    except (Abort, KeyboardInterrupt):
        _fail("aborted", 130)
    except CliError as error:
        _fail(str(error), error.exit_code)
    except ChatledgerError as error:
        _fail(str(error), 1)
    except ArgumentError as error:
        _fail(f"invalid database URL: {error}", 1)
    except (OSError, ValueError, LookupError) as error:
        _fail(f"{type(error).__name__}: {error}", 1)
    except Exception as error:
        _unexpected(error)
    raise SystemExit(result if isinstance(result, int) else 0)
