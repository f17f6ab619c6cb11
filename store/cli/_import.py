"""``chatledger import``: chat logs of other systems into the store.

Every source is validated completely before anything is written (a refused source
writes nothing), then written; importing the same sources again adds nothing. Progress
goes to stderr: a bar on a terminal, a plain line every :data:`PROGRESS_EVERY`
messages otherwise. The report goes to stdout (``--json``: the
:class:`~store.importing.ImportReport` object).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from store.cli._common import CliError, emit_json, json_option, run, tenant_option, url_option
from store.cli._output import echo, number, quantity

if TYPE_CHECKING:
    from store.importing import ImportReport

__all__ = ["import_"]

PROGRESS_EVERY = 10_000
"""Messages between two plain progress lines."""


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


def _summary(report: ImportReport) -> None:
    verb = "would import" if report.dry_run else "imported"
    echo(
        f"{verb} {quantity(report.sessions, 'session')}, {quantity(report.messages, 'message')} "
        f"({quantity(report.tool_calls, 'tool call')}, {quantity(report.tool_results, 'result')}, "
        f"{quantity(report.tokens, 'token')})"
    )
    echo(f"{number(report.new)} new, {number(report.already_stored)} already stored")
    for warning in report.warnings:
        echo(f"warning: {warning}", err=True)
    for skipped in report.skipped:
        echo(f"skipped: {skipped.reason}")


@click.command("import")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--format", "fmt", metavar="ID", help="The sources' format (default: detected).")
@click.option("--session-prefix", default="", metavar="P", help="Prefix of every session id.")
@click.option("--compact", "spec", metavar="SPEC", help="Compact each session afterwards.")
@click.option("--dry-run", is_flag=True, help="Validate and count; write nothing.")
@click.option("--skip-invalid", is_flag=True, help="Import the valid sessions, list the rest.")
@click.option("--strict", is_flag=True, help="Refuse results that answer no call.")
@click.option("--table", metavar="NAME", help="A database source's messages table.")
@click.option(
    "--sessions-table",
    metavar="NAME",
    help="A database source's sessions table (accepted; the messages table is what is read).",
)
@url_option
@tenant_option
@json_option
def import_(
    sources: tuple[str, ...],
    fmt: str | None,
    session_prefix: str,
    spec: str | None,
    dry_run: bool,
    skip_invalid: bool,
    strict: bool,
    table: str | None,
    sessions_table: str | None,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Import chat logs: files, folders or SQLite databases of other systems.

    A SOURCE is a path, or a SQLite database's URL (sqlite:///PATH).

    Formats: jsonl, openai-chat, openai-responses, anthropic, openai-agents, langchain,
    agent-framework, adk (docs/importing.md).
    """
    from store.importing import FORMATS, import_sources
    from store.sql.store import HistoryStore

    if fmt is not None and fmt not in FORMATS:
        raise CliError(f"invalid --format {fmt!r} (one of {', '.join(FORMATS)})", exit_code=2)
    if spec is not None:
        from strategies import parse_strategy

        try:
            parse_strategy(spec)
        except ValueError as error:
            raise CliError(f"invalid --compact: {error}", exit_code=2) from None

    async def action() -> ImportReport:
        async with HistoryStore.open(url, tenant=tenant) as store:
            with _progress(as_json) as progress:
                return await import_sources(
                    store,
                    list(sources),
                    format=fmt,
                    session_prefix=session_prefix,
                    compact=spec,
                    dry_run=dry_run,
                    skip_invalid=skip_invalid,
                    strict=strict,
                    table=table,
                    progress=progress,
                )

    report = run(action())
    if as_json:
        emit_json(report)
    else:
        _summary(report)
