"""The ``chatledger`` command line.

::

    chatledger sessions                       the tenant's sessions, newest first
    chatledger show SESSION [--all|--context] messages, or what the model is sent next
    chatledger audit [SESSION]                compaction events: what, why, what it saved
    chatledger excluded SESSION               the excluded groups and why
    chatledger why SESSION MESSAGE            whether a message is sent, and why (not)
    chatledger stats [SESSION]                stored versus active counts
    chatledger usage [SESSION] [--by B]       what the model calls used and cost
    chatledger compact SESSION --strategy S   compact now (--dry-run: a what-if)
    chatledger compact SESSION --reason WHY   ask for compaction (now, with --strategy)
    chatledger restore SESSION --group G      bring groups back (pinned), or --event E
    chatledger pin|unpin SESSION GROUP...     keep groups out of every compaction
    chatledger delete SESSION                 delete a session (asks first)
    chatledger title SESSION [TITLE|--clear]  show, set or remove a session's title
    chatledger recount SESSION --tokenizer T  recount with another tokenizer
    chatledger fork SESSION [--at M] [--as ID] a new session from its history up to M
    chatledger rewind SESSION --to M          set what follows M aside (asks first)
    chatledger branches SESSION               its parent, forks and superseded tails
    chatledger tenants                        every tenant of the database
    chatledger purge --older-than 30d         remove old sessions for good (asks first)
    chatledger redact SESSION MESSAGE... --reason R   replace messages by tombstones
    chatledger doctor [SESSION] [--fix]       check for damage; repair what can be
    chatledger search QUERY [--session S]     messages that match, excluded ones too
    chatledger db upgrade|downgrade|current|check|history|search on|off
    chatledger demo                           a long, tool-heavy scripted conversation
    chatledger import SOURCE...               chat logs of other systems, idempotently
    chatledger export SESSION... --format ID  sessions out, in the formats import reads
    chatledger encrypt --tenant T             encrypt a tenant's rows (resumable)
    chatledger keys new PATH [--add]          write a key file, or add a key to one
    chatledger keys rotate --kek|--tenant T   rewrap the data keys, or rekey a tenant
    chatledger keys events [--tenant T]       encryptions and rotations, running or done

Commands take ``--url`` (a URL or a SQLite file's path; default ``$CHATLEDGER_URL``,
else ``./chatledger.db``) with ``--key-file`` (the key of encrypted tenants; default
``$CHATLEDGER_KEY_FILE``), those that read or change sessions ``--tenant``, and
``--json``. Errors are one line on stderr; usage errors exit 2, other failures 1;
``CHATLEDGER_DEBUG=1`` adds the traceback of unexpected errors.

Only ``click`` loads before a command runs: the commands are listed here with their
summaries (:data:`_COMMANDS`, checked against the commands themselves by the tests), and
a command's module is imported when it runs or its own help is asked for. ``--help``,
``--version`` and ``version`` import neither the store nor a tokenizer, and each
command loads only what it uses.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from store.cli._version import installed_version

__all__ = ["cli", "main"]

DEBUG_ENV = "CHATLEDGER_DEBUG"

_COMMANDS: dict[str, tuple[str, str, str]] = {
    "sessions": (
        "store.cli._read",
        "sessions",
        "List the tenant's sessions, most recently updated first.",
    ),
    "show": (
        "store.cli._read",
        "show",
        "Show a session's messages, or what the model is sent next.",
    ),
    "audit": (
        "store.cli._audit",
        "audit",
        "List compaction events: what each did (or why it did not), what it saved.",
    ),
    "excluded": ("store.cli._audit", "excluded", "List a session's excluded groups and why."),
    "why": ("store.cli._audit", "why", "Say whether a message is sent to the model, and why."),
    "stats": (
        "store.cli._read",
        "stats",
        "Stored versus active totals of a session or the tenant.",
    ),
    "usage": (
        "store.cli._model_usage",
        "usage",
        "Show what the recorded model calls used and cost, by model, session or day.",
    ),
    "compact": (
        "store.cli._change",
        "compact",
        "Compact a session now, see what a strategy would do, or ask for compaction.",
    ),
    "restore": (
        "store.cli._change",
        "restore",
        "Bring excluded groups back (pinned), or undo an event.",
    ),
    "pin": ("store.cli._change", "pin", "Pin groups: no strategy excludes them."),
    "unpin": ("store.cli._change", "unpin", "Unpin groups: strategies may exclude them again."),
    "delete": ("store.cli._change", "delete", "Delete a session and all it holds (asks first)."),
    "title": ("store.cli._change", "title", "Show a session's title, set it, or remove it."),
    "recount": (
        "store.cli._change",
        "recount",
        "Recount a session's tokens with another tokenizer.",
    ),
    "fork": (
        "store.cli._branch",
        "fork",
        "Start a new session from a session's history up to a message (a branch).",
    ),
    "rewind": (
        "store.cli._branch",
        "rewind",
        "Set aside a session's messages after a message; restore brings them back (asks first).",
    ),
    "branches": (
        "store.cli._branch",
        "branches",
        "List a session's parent, forks and superseded tails.",
    ),
    "search": (
        "store.cli._search",
        "search",
        'Search stored messages: words (all must match), "quoted phrases", prefix*.',
    ),
    "tenants": (
        "store.cli._read",
        "tenants",
        "List every tenant of the database (for administrators).",
    ),
    "purge": (
        "store.cli._retention",
        "purge",
        "Remove a tenant's sessions last updated before a time, with everything they hold.",
    ),
    "redact": (
        "store.cli._retention",
        "redact",
        "Replace messages by tombstones (role, call ids and pairing kept), for good.",
    ),
    "doctor": (
        "store.cli._doctor",
        "doctor",
        "Check sessions for damage and inconsistencies; --fix repairs what it can.",
    ),
    "db": ("store.cli._db", "db", "Create, upgrade and inspect the database schema."),
    "demo": (
        "store.cli._demo",
        "demo",
        "Play a long, tool-heavy scripted conversation (offline).",
    ),
    "import": (
        "store.cli._import",
        "import_",
        "Import chat logs: files, folders or databases of other systems.",
    ),
    "export": (
        "store.cli._export",
        "export",
        "Export sessions: jsonl, openai-chat, openai-responses, anthropic, langchain, "
        "pydantic-ai, vercel-ai or agent-framework (docs/importing.md gives each shape).",
    ),
    "report": (
        "store.cli._report",
        "report",
        "Write a session's visual audit: one self-contained HTML page.",
    ),
    "encrypt": (
        "store.cli._encryption",
        "encrypt",
        "Encrypt a tenant's stored rows with a new data key (resumable).",
    ),
    "keys": (
        "store.cli._encryption",
        "keys",
        "Make key files, rotate keys, list key events (encryption at rest).",
    ),
}
"""Every command but ``version``, in the order people meet them: its module, the name of
the command there, and its summary (the first sentence of its help)."""


class _Deferred(click.Command):
    """Stands for a command in the listing until it is used: its name and summary, and
    where the command is defined."""

    def __init__(self, name: str, module: str, attribute: str, summary: str) -> None:
        super().__init__(name, help=summary)
        self.module = module
        self.attribute = attribute

    def load(self) -> click.Command:
        """The command itself (importing its module), its ``SESSION`` argument reading a
        unique start of an id too (:func:`store.cli._ids.accepting_prefixes`)."""
        from store.cli._ids import accepting_prefixes

        command: click.Command = getattr(importlib.import_module(self.module), self.attribute)
        return accepting_prefixes(command)


class _Commands(click.Group):
    """Lists the commands in the order people meet them, not alphabetically, with the
    summaries of :data:`_COMMANDS`; a command's module loads when the command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if isinstance(command, _Deferred):
            command = self.commands[cmd_name] = command.load()
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries, as click writes them, from the listing
        alone: no command's module is imported to show them."""
        listed = [(name, self.commands[name]) for name in self.list_commands(ctx)]
        shown = [(name, command) for name, command in listed if not command.hidden]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in shown])


def _show_version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"chatledger {installed_version()}")
        ctx.exit()


@click.group(
    cls=_Commands,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_show_version,
    help="Show the version and exit.",
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """chatledger: a persistent chat-history store for LLM agents, in SQL."""
    if ctx.invoked_subcommand is None:  # a usage error: the help, on stderr, exit 2
        click.echo(ctx.get_help(), err=True)
        ctx.exit(2)


for _name, (_module, _attribute, _summary) in _COMMANDS.items():
    cli.add_command(_Deferred(_name, _module, _attribute, _summary))


@cli.command()
def version() -> None:
    """Print the installed version."""
    click.echo(f"chatledger {installed_version()}")


def _fail(message: str, code: int) -> NoReturn:
    from store.cli._visible import visible

    first = visible(message.strip().split("\n")[0]) if message.strip() else "failed"
    sys.stderr.write(f"chatledger: error: {first}\n")
    sys.stderr.flush()
    raise SystemExit(code)


def _unexpected(error: BaseException) -> NoReturn:
    if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        traceback.print_exception(error, file=sys.stderr)
    else:
        from store.cli._visible import visible

        sys.stderr.write(
            f"chatledger: unexpected error: {type(error).__name__}: {visible(str(error))} "
            f"(set {DEBUG_ENV}=1 for the traceback)\n"
        )
    raise SystemExit(1)


def _usage(error: click.UsageError) -> NoReturn:
    where = f" (see `{error.ctx.command_path} --help`)" if error.ctx is not None else ""
    _fail(error.format_message() + where, 2)


UPGRADE = "`chatledger db upgrade`"


def _with_url(message: str, argv: Sequence[str]) -> str:
    """``message`` with the ``--url`` the command was given added to the command it
    suggests (run as written, it must reach the same database), its password, if it
    has one, written ``***``: an error line is no place for a secret."""
    if UPGRADE not in message:
        return message
    given = None
    for index, arg in enumerate(argv):
        if arg == "--url" and index + 1 < len(argv):
            given = argv[index + 1]
        elif arg.startswith("--url="):
            given = arg.removeprefix("--url=")
    if given is None:
        return message
    import re
    import shlex

    given = re.sub(r"^([\w+.-]+://[^:/@]*):[^@/]*@", r"\1:***@", given)

    return message.replace(UPGRADE, f"`chatledger db upgrade --url {shlex.quote(given)}`")


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console-script entry point: run the CLI and turn every failure into one line."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=argv, prog_name="chatledger", standalone_mode=False)
    except click.UsageError as error:
        _usage(error)
    except click.ClickException as error:
        _fail(error.format_message(), error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        _fail("aborted", 130)
    except Exception as error:
        from store.cli._common import CliError
        from store.errors import ChatledgerError

        if isinstance(error, CliError):
            _fail(str(error), error.exit_code)
        if isinstance(error, ChatledgerError):
            _fail(_with_url(str(error), args), 1)
        if isinstance(error, OSError | ValueError | LookupError):
            _fail(f"{type(error).__name__}: {error}", 1)
        _unexpected(error)
    raise SystemExit(result if isinstance(result, int) else 0)
