"""``chatledger demo``: play the scripted, tool-heavy conversation and show what happened."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from store.cli._common import (
    TENANT_ENV,
    URL_ENV,
    CliError,
    emit_json,
    encryption_options,
    run,
    tenant_option,
    url_option,
)
from store.cli._output import echo, number, print_table
from store.cli._render import events_table

if TYPE_CHECKING:
    from store.demo import DemoConfig, DemoReport, TurnRecord

__all__ = ["demo", "inspect_commands", "turn_line"]

MAX_EVENTS_SHOWN = 10


def turn_line(record: TurnRecord) -> str:
    """One line per turn: the largest request against the budget, and what is stored."""
    sent = f"{number(record.max_sent):>6} / {number(record.budget)}"
    flag = "  OVER BUDGET" if not record.within_budget else ""
    saved = f"  saved {number(record.tokens_saved)}" if record.compaction_event else ""
    return (
        f"turn {record.turn:>3}  calls {len(record.sent_tokens)}  sent max {sent}"
        f"  stored {number(record.stored_tokens):>8}  active {number(record.active_tokens):>6}"
        f"{saved}{flag}"
    )


def program() -> str:
    """How to run chatledger again from here: ``chatledger`` when that is on the PATH and
    is this program, else the path it was started by (``.venv/bin/chatledger``)."""
    import shutil
    import sys

    started = sys.argv[0] if sys.argv else ""
    if Path(started).name != "chatledger":
        return "chatledger"  # run as python -m store.cli, or from a test
    found = shutil.which("chatledger")
    if found is not None and Path(found).resolve() == Path(started).resolve():
        return "chatledger"
    return shlex.quote(started)


def inspect_commands(session_id: str, url: str | None, tenant: str) -> list[str]:
    """The commands that show the demo's result, with the options they need (and the
    program's path when ``chatledger`` alone would not find it)."""
    name = program()
    extra = ""
    if url is not None and os.environ.get(URL_ENV) != url:
        extra += f" --url {shlex.quote(url)}"
    if tenant != "default" and os.environ.get(TENANT_ENV) != tenant:
        extra += f" --tenant {shlex.quote(tenant)}"
    sid = shlex.quote(session_id)
    return [
        f"{name} sessions{extra}",
        f"{name} show {sid} --context{extra}",
        f"{name} show {sid} --all{extra}",
        f"{name} audit {sid}{extra}",
        f"{name} excluded {sid}{extra}",
        f"{name} stats {sid}{extra}",
    ]


async def _play(url: str | None, tenant: str, config: DemoConfig, quiet: bool) -> DemoReport:
    from store.demo import run_demo
    from store.errors import SessionNotFound
    from store.sql.store import HistoryStore

    def on_turn(record: TurnRecord) -> None:
        if not quiet:
            echo(turn_line(record), style=None if record.within_budget else "bold red")

    async with HistoryStore.open(url, tenant=tenant, **encryption_options()) as store:
        if config.session_id is not None:
            try:
                found = await store.session(config.session_id)
            except SessionNotFound:
                pass
            else:
                raise CliError(
                    f"session {config.session_id!r} already holds "
                    f"{number(found.stored_messages)} messages: give a new --session (or "
                    f"none), or delete it first (chatledger delete {config.session_id})"
                )
        return await run_demo(store, config, on_turn=on_turn)


def _summary(report: DemoReport, url: str | None, tenant: str) -> None:
    from store.sql.drivers.engine import describe_url

    last = report.turns[-1]
    echo()
    echo(
        f"{len(report.turns)} turns on session {report.session_id} ({describe_url(url)}): "
        f"{number(last.stored_messages)} messages and {number(last.stored_tokens)} tokens "
        f"stored; largest request {number(max(t.max_sent for t in report.turns))} tokens, "
        f"input budget {number(report.budget)}; {len(report.events)} compaction events."
    )
    if report.events:
        shown = list(report.events[:MAX_EVENTS_SHOWN])  # newest first
        print_table(events_table(shown, f"Newest {len(shown)} compaction events"), empty="")
    else:
        echo("No compaction events (the conversation fitted the window).")
    echo()
    echo("Inspect the result:")
    for command in inspect_commands(report.session_id, url, tenant):
        echo(f"  {command}")


@click.command()
@click.option(
    "--turns",
    type=click.IntRange(min=1),
    default=60,
    show_default=True,
    metavar="N",
    help="User turns to play.",
)
@click.option(
    "--session", "session_id", metavar="SESSION", help="A new session's id (default: demo-<hex>)."
)
@click.option(
    "--window",
    type=click.IntRange(min=1024),
    default=8192,
    show_default=True,
    metavar="TOKENS",
    help="The model's context window.",
)
@click.option(
    "--output-tokens",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    metavar="TOKENS",
    help="Tokens kept for the answer.",
)
@click.option(
    "--seed",
    type=int,
    default=7,
    show_default=True,
    metavar="N",
    help="Seed of the scripted conversation.",
)
@url_option
@tenant_option
@click.option("--json", "as_json", is_flag=True, help="Print the per-turn records as JSON.")
def demo(
    turns: int,
    session_id: str | None,
    window: int,
    output_tokens: int,
    seed: int,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Play a long, tool-heavy scripted conversation (offline)."""
    from store.demo import DemoConfig, MissingResult

    if output_tokens >= window // 2:
        raise CliError("--output-tokens must be less than half of --window", exit_code=2)
    config = DemoConfig(
        turns=turns,
        session_id=session_id,
        max_context_window_tokens=window,
        max_output_tokens=output_tokens,
        seed=seed,
    )
    try:
        report = run(_play(url, tenant, config, quiet=as_json))
    except MissingResult as error:
        raise CliError(f"the provider broke a tool call from its result: {error}") from error
    if as_json:
        emit_json(list(report.turns))
    else:
        _summary(report, url, tenant)
    if report.violations:
        for violation in report.violations:
            echo(f"violation: {violation}", err=True)
        raise CliError(f"the demo found {len(report.violations)} violation(s); see above")
