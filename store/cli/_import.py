"""``chatledger import``: chat logs of other systems into the store.

Every source is validated completely before anything is written (a refused source
writes nothing), then written; importing the same sources again adds nothing. Progress
goes to stderr: a bar on a terminal, a plain line every :data:`PROGRESS_EVERY`
messages otherwise. The report goes to stdout (``--json``: the
:class:`~store.importing.ImportReport` object): what was stored and what was stored
already, and a line for every session or source skipped. Interrupted (Ctrl-C), it says
what was stored and exits 130; running the same command again finishes the import.
"""

from __future__ import annotations

import codecs
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from store.cli._common import (
    CliError,
    emit_json,
    encryption_options,
    json_option,
    run,
    tenant_option,
    url_option,
)
from store.cli._output import echo, number, quantity

if TYPE_CHECKING:
    from store.importing import ImportReport, SkippedSource

__all__ = ["import_"]

PROGRESS_EVERY = 10_000
"""Messages between two plain progress lines."""


class _Tracker:
    """What the import has done so far, from its progress: told on stderr (a spinner
    on a terminal, a plain line every :data:`PROGRESS_EVERY` messages otherwise), and
    kept to say what was stored when the import is interrupted."""

    def __init__(self, show: Callable[[str, int], None] | None) -> None:
        self.show = show
        self.counts: dict[str, int] = {}

    def __call__(self, phase: str, done: int) -> None:
        self.counts[phase] = done
        if self.show is not None and phase in ("validate", "write"):
            self.show(phase, done)

    def interrupted(self) -> str:
        """What an interrupted import left, and what to do."""
        if "write" not in self.counts:
            return "interrupted while checking the sources: nothing was written"
        sessions = self.counts.get("sessions", 0)
        stored = self.counts.get("stored", 0)
        return (
            f"interrupted: {quantity(sessions, 'session')} ({quantity(stored, 'new message')}) "
            "were stored whole, a session being written in parts is marked for doctor; run "
            "the same command again to finish the import"
        )


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int], None] | None]:
    if quiet:
        yield None
        return
    if not sys.stderr.isatty():
        last = {"validate": 0, "write": 0}

        def plain(phase: str, done: int) -> None:
            if done - last[phase] >= PROGRESS_EVERY:
                last[phase] = done
                sys.stderr.write(f"chatledger: {phase}: {done:,} messages\n")
                sys.stderr.flush()

        yield plain
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def fancy(phase: str, done: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase)
            bar.update(tasks[phase], description=f"{phase}: {done:,} messages")

        yield fancy


def _skipped(report: ImportReport) -> Iterator[str]:
    kinds = Counter(_kind(skipped) for skipped in report.skipped)
    yield "skipped " + ", ".join(
        quantity(kinds[kind], kind) for kind in ("session", "conversation", "source") if kinds[kind]
    )
    for skipped in report.skipped:
        kind = _kind(skipped)
        named = f" {skipped.session_id!r}" if kind == "session" else ""
        yield f"skipped {kind}{named}: {skipped.reason}"


def _kind(skipped: SkippedSource) -> str:
    """What was left out: a session, a conversation without an id, or a whole source."""
    if skipped.session_id is not None:
        return "session"
    return "source" if skipped.where is None else "conversation"


def _summary(report: ImportReport) -> None:
    echo(
        f"{quantity(report.sessions, 'session')}, {quantity(report.messages, 'message')} "
        f"({quantity(report.tool_calls, 'tool call')}, {quantity(report.tool_results, 'result')}, "
        f"{quantity(report.tokens, 'token')})"
    )
    stored = (
        f"would store {number(report.new)}" if report.dry_run else f"{number(report.new)} stored"
    )
    echo(f"{stored}, {number(report.already_stored)} already stored")
    if report.usage_calls:
        echo(f"usage of {quantity(report.usage_calls, 'model call')} recorded")
    for warning in report.warnings:
        echo(f"warning: {warning}", err=True)
    if report.skipped:
        for line in _skipped(report):
            echo(line)


@click.command("import")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--format", "fmt", metavar="ID", help="The sources' format (default: detected).")
@click.option("--session-prefix", default="", metavar="P", help="Prefix of every session id.")
@click.option(
    "--prefix-by-source",
    is_flag=True,
    help="Put each source's format and / before its session ids (after --session-prefix).",
)
@click.option("--compact", "spec", metavar="SPEC", help="Compact each session afterwards.")
@click.option("--dry-run", is_flag=True, help="Validate and count; write nothing.")
@click.option("--skip-invalid", is_flag=True, help="Import the valid sessions, list the rest.")
@click.option("--strict", is_flag=True, help="Refuse results that answer no call.")
@click.option(
    "--encoding", metavar="NAME", help="Text sources' encoding (default: UTF-8, or by BOM)."
)
@click.option(
    "--allow-custom-roles", is_flag=True, help="Keep roles outside system, user, assistant, tool."
)
@click.option("--table", metavar="NAME", help="A database source's messages table.")
@click.option(
    "--sessions-table",
    metavar="NAME",
    help="A database source's sessions table (accepted; the messages table is what is read).",
)
@click.option(
    "--channel",
    metavar="NAME",
    help="A LangGraph checkpoint database's channel of messages (default: messages).",
)
@click.option(
    "--create",
    is_flag=True,
    help="Create chatledger's schema when --url names a database without it.",
)
@url_option
@tenant_option
@json_option
def import_(
    sources: tuple[str, ...],
    fmt: str | None,
    session_prefix: str,
    prefix_by_source: bool,
    spec: str | None,
    dry_run: bool,
    skip_invalid: bool,
    strict: bool,
    encoding: str | None,
    allow_custom_roles: bool,
    table: str | None,
    sessions_table: str | None,
    channel: str | None,
    create: bool,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Import chat logs: files, folders or databases of other systems.

    A SOURCE is a path (a file, a folder, or a data export's .zip), a SQLite
    database's URL (sqlite:///PATH), or a PostgreSQL database's URL
    (postgresql://USER:PASSWORD@HOST/DB) for the database formats, read-only; its
    password is never shown.

    Formats: jsonl, openai-chat, openai-responses, anthropic, openai-agents, langchain,
    agent-framework, adk, langgraph, pydantic-ai, vercel-ai, claude-code, codex,
    chatgpt, claude-ai, open-webui (docs/importing.md). A langgraph source (a LangGraph
    checkpoint database: SqliteSaver's file or PostgresSaver's URL) imports a session a
    thread, with what trimming dropped excluded; --channel names its messages' channel.

    open-webui reads Open WebUI's webui.db (its chat table; --table names another) or
    the JSON its "Export chats" writes: each chat's current path is a session, its
    regenerated answers and edited questions forks.

    Into a database without chatledger's schema it imports only with --create (or at
    the default ./chatledger.db, which it creates).

    Exits 1 when a source or session is refused (nothing is written), or, with
    --skip-invalid, when every session was skipped.
    """
    from store.importing import FORMATS, import_sources
    from store.sql.store import HistoryStore

    if fmt is not None and fmt not in FORMATS:
        raise CliError(f"invalid --format {fmt!r} (one of {', '.join(FORMATS)})", exit_code=2)
    if encoding is not None:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise CliError(
                f"invalid --encoding {encoding!r}: no such encoding", exit_code=2
            ) from None
    if spec is not None:
        from strategies import parse_strategy

        try:
            parse_strategy(spec)
        except ValueError as error:
            raise CliError(f"invalid --compact: {error}", exit_code=2) from None

    async def action(tracker: _Tracker) -> ImportReport:
        may_create = create or url is None  # the default file is chatledger's own
        keys = encryption_options()
        async with HistoryStore.open(url, tenant=tenant, create=may_create, **keys) as store:
            return await import_sources(
                store,
                list(sources),
                format=fmt,
                session_prefix=session_prefix,
                prefix_by_source=prefix_by_source,
                compact=spec,
                dry_run=dry_run,
                skip_invalid=skip_invalid,
                strict=strict,
                table=table,
                encoding=encoding,
                allow_custom_roles=allow_custom_roles,
                channel=channel,
                progress=tracker,
            )

    from store.errors import MigrationRequired

    with _progress(as_json) as show:
        tracker = _Tracker(show)
        try:
            report = run(action(tracker))
        except KeyboardInterrupt:
            raise CliError(tracker.interrupted(), exit_code=130) from None
        except MigrationRequired as error:
            if not str(error).endswith("to create it"):
                raise
            raise MigrationRequired(f"{error}, or import with --create") from None
    if as_json:
        emit_json(report)
    else:
        _summary(report)
    if report.skipped and not report.sessions:
        raise CliError(
            f"nothing imported: every session was skipped ({len(report.skipped)} listed)"
        )
