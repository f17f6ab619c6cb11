"""The ``chatledger`` command line.

::

    chatledger sessions                       the tenant's sessions, newest first
    chatledger show SESSION [--all|--context] messages, or what the model is sent next
    chatledger audit [SESSION]                compaction events: what, why, what it saved
    chatledger excluded SESSION               the excluded groups and why
    chatledger why SESSION MESSAGE            whether a message is sent, and why (not)
    chatledger stats [SESSION]                stored versus active counts
    chatledger compact SESSION --strategy S   compact now (--dry-run: a what-if)
    chatledger restore SESSION --group G      bring groups back (pinned), or --event E
    chatledger pin|unpin SESSION GROUP...     keep groups out of every compaction
    chatledger delete SESSION                 delete a session (asks first)
    chatledger recount SESSION --tokenizer T  recount with another tokenizer
    chatledger tenants                        every tenant of the database
    chatledger purge --older-than 30d         remove old sessions for good (asks first)
    chatledger redact SESSION MESSAGE... --reason R   replace messages by tombstones
    chatledger doctor [SESSION] [--fix]       check for damage; repair what can be
    chatledger db upgrade|downgrade|current|check|history
    chatledger demo                           a long, tool-heavy scripted conversation
    chatledger import SOURCE...               chat logs of other systems, idempotently
    chatledger export SESSION... --format ID  sessions out, in the formats import reads

Commands take ``--url`` (a URL or a SQLite file's path; default ``$CHATLEDGER_URL``,
else ``./chatledger.db``), those that read or change sessions ``--tenant``, and
``--json``. Errors are one line on stderr; usage errors exit 2, other failures 1;
``CHATLEDGER_DEBUG=1`` adds the traceback of unexpected errors. Only ``click`` loads
before a command runs: ``--help`` and ``--version`` import neither the store nor a
tokenizer.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import click

from store.cli._audit import audit, excluded, why
from store.cli._change import compact, delete, pin, recount, restore, unpin
from store.cli._common import CliError
from store.cli._db import db
from store.cli._demo import demo
from store.cli._doctor import doctor
from store.cli._export import export
from store.cli._import import import_
from store.cli._read import sessions, show, stats, tenants
from store.cli._report import report
from store.cli._retention import purge, redact

__all__ = ["cli", "main"]

DEBUG_ENV = "CHATLEDGER_DEBUG"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("chatledger")
    except PackageNotFoundError:  # pragma: no cover - a checkout without metadata
        return "unknown (not installed)"


class _Commands(click.Group):
    """Lists the commands in the order people meet them, not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(
    cls=_Commands,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(
    _version(), "--version", "-V", prog_name="chatledger", message="%(prog)s %(version)s"
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """chatledger: a persistent chat-history store for LLM agents, in SQL."""
    if ctx.invoked_subcommand is None:  # a usage error: the help, on stderr, exit 2
        click.echo(ctx.get_help(), err=True)
        ctx.exit(2)


for _command in (
    sessions,
    show,
    audit,
    excluded,
    why,
    stats,
    compact,
    restore,
    pin,
    unpin,
    delete,
    recount,
    tenants,
    purge,
    redact,
    doctor,
    db,
    demo,
    import_,
    export,
    report,
):
    cli.add_command(_command)


@cli.command()
def version() -> None:
    """Print the installed version."""
    click.echo(f"chatledger {_version()}")


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


def _usage(error: click.UsageError) -> NoReturn:
    where = f" (see `{error.ctx.command_path} --help`)" if error.ctx is not None else ""
    _fail(error.format_message() + where, 2)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point: run the CLI and turn every failure into one line."""
    try:
        result = cli.main(args=argv, prog_name="chatledger", standalone_mode=False)
    except click.UsageError as error:
        _usage(error)
    except click.ClickException as error:
        _fail(error.format_message(), error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        _fail("aborted", 130)
    except CliError as error:
        _fail(str(error), error.exit_code)
    except Exception as error:
        from store.errors import ChatledgerError

        if isinstance(error, ChatledgerError):
            _fail(str(error), 1)
        if isinstance(error, OSError | ValueError | LookupError):
            _fail(f"{type(error).__name__}: {error}", 1)
        _unexpected(error)
    raise SystemExit(result if isinstance(result, int) else 0)
