"""``chatledger demo``: run the scripted, tool-heavy conversation and show what happened."""

from __future__ import annotations

import os
import shlex
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from store.cli._common import (
    TENANT_ENV,
    URL_ENV,
    CliError,
    TenantOpt,
    UrlOpt,
    console,
    describe_url,
    emit_json,
    err_console,
    run,
)
from store.cli._render import events_table
from store.demo import DemoConfig, DemoReport, MissingResult, TurnRecord, run_demo
from store.sql.store import HistoryStore

__all__ = ["demo", "inspect_commands", "turn_line"]

MAX_EVENTS_SHOWN = 20


def turn_line(record: TurnRecord) -> str:
    """One line per turn: the largest request against the budget, and what is stored."""
    sent = f"{record.max_sent:>6,} / {record.budget:,}"
    flag = "" if record.within_budget else "  [bold red]OVER BUDGET[/]"
    saved = f"  compacted: saved {record.tokens_saved:,}" if record.compaction_event else ""
    return (
        f"turn {record.turn:>4}  calls {len(record.sent_tokens)}  sent max {sent}"
        f"  stored {record.stored_tokens:>9,}  active {record.active_tokens:>7,}{saved}{flag}"
    )


def inspect_commands(session_id: str, url: str | None, tenant: str) -> list[str]:
    """The commands that show the demo's result, with the options they need."""
    extra = ""
    if url is not None and os.environ.get(URL_ENV) != url:
        extra += f" --url {shlex.quote(url)}"
    if tenant != "default" and os.environ.get(TENANT_ENV) != tenant:
        extra += f" --tenant {shlex.quote(tenant)}"
    sid = shlex.quote(session_id)
    return [
        f"chatledger sessions{extra}",
        f"chatledger show {sid} --context{extra}",
        f"chatledger show {sid} --all{extra}",
        f"chatledger audit {sid}{extra}",
        f"chatledger stats{extra}",
    ]


async def _play(url: str | None, tenant: str, config: DemoConfig, out: Console) -> DemoReport:
    progress = Progress(
        TextColumn("[bold]demo"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
    )

    def on_turn(record: TurnRecord) -> None:
        progress.console.print(turn_line(record))
        progress.advance(task)

    task = progress.add_task("turns", total=config.turns)
    async with HistoryStore.open(url, tenant=tenant) as store:
        with progress:
            return await run_demo(store, config, on_turn=on_turn)


def _summary(report: DemoReport, url: str | None, tenant: str) -> None:
    last = report.turns[-1]
    console.print(
        f"\n[bold]{len(report.turns)} turns[/] on session [bold]{report.session_id}[/] "
        f"({describe_url(url)}): {last.stored_messages:,} messages and "
        f"{last.stored_tokens:,} tokens stored; largest request "
        f"{max(t.max_sent for t in report.turns):,} tokens, input budget {report.budget:,}."
    )
    if report.events:
        shown = report.events[:MAX_EVENTS_SHOWN]  # newest first
        console.print(events_table(shown, with_session=False))
        if len(report.events) > len(shown):
            console.print(
                f"({len(report.events) - len(shown)} older events: "
                f"chatledger audit {shlex.quote(report.session_id)})",
                markup=False,
            )
    else:
        console.print("No compaction events (the conversation fitted the window).")
    console.print("\nInspect the result:")
    for command in inspect_commands(report.session_id, url, tenant):
        console.print(f"  {command}", markup=False)


def demo(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    turns: Annotated[int, typer.Option(min=1, help="User turns to play.")] = 60,
    session: Annotated[
        str | None, typer.Option(help="Session id (default: a new demo-<hex>).")
    ] = None,
    window: Annotated[
        int, typer.Option(min=1024, help="The model's context window, in tokens.")
    ] = 8192,
    output_tokens: Annotated[int, typer.Option(min=0, help="Tokens kept for the answer.")] = 1024,
    seed: Annotated[int, typer.Option(help="Seed of the scripted conversation.")] = 7,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON array of the per-turn records.")
    ] = False,
) -> None:
    """Play a long, tool-heavy conversation (scripted model, local tools, no network)."""
    if output_tokens >= window // 2:
        raise CliError("--output-tokens must be less than half of --window", exit_code=2)
    config = DemoConfig(
        turns=turns,
        session_id=session,
        max_context_window_tokens=window,
        max_output_tokens=output_tokens,
        seed=seed,
    )
    try:
        report = run(_play(url, tenant, config, err_console if as_json else console))
    except MissingResult as error:
        raise CliError(f"the provider broke a tool call from its result: {error}") from error
    if as_json:
        emit_json(list(report.turns))
    else:
        _summary(report, url, tenant)
    if report.violations:
        for violation in report.violations:
            err_console.print(f"[bold red]violation:[/] {violation}", markup=True)
        raise CliError(f"the demo found {len(report.violations)} violation(s); see above")
