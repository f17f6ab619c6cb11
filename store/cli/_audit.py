"""The audit commands: ``audit``, ``excluded`` and ``why``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from store.cli._common import (
    emit_json,
    json_option,
    parse_since,
    tenant_option,
    url_option,
    with_store,
)
from store.cli._output import echo, print_table, terminal_width
from store.cli._render import events_table, excluded_table

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import CompactionEvent, ExcludedGroup, WhyResult

__all__ = ["audit", "excluded", "why"]

PHASES = ("after_run", "manual", "import", "restore", "fork", "rewind")
"""The phases an event may have (``store.models.PHASES``, without importing the store)."""

OUTCOMES = ("applied", "failed", "blocked", "abandoned")
"""The outcomes an event may have (``store.models.OUTCOMES``, without importing the store)."""


@click.command()
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--since", metavar="WHEN", help="Only events since: ISO time or 30m, 2h, 7d.")
@click.option("--strategy", metavar="NAME", help="Only events of this strategy.")
@click.option("--phase", type=click.Choice(PHASES), help="Only events of this phase.")
@click.option(
    "--outcome", type=click.Choice(OUTCOMES), help="Only events of this outcome (e.g. failed)."
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N events.")
@url_option
@tenant_option
@json_option
def audit(
    session_id: str | None,
    since: str | None,
    strategy: str | None,
    phase: str | None,
    outcome: str | None,
    limit: int | None,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """List compaction events: what each did (or why it did not), what it saved."""
    moment = parse_since(since) if since is not None else None

    async def action(store: HistoryBackend) -> list[CompactionEvent]:
        from store.models import OUTCOMES as RESULTS
        from store.models import PHASES as KNOWN

        chosen = next((p for p in KNOWN if p == phase), None)
        result = next((o for o in RESULTS if o == outcome), None)
        return await store.audit(
            session_id,
            since=moment,
            strategy=_strategy_name(strategy),
            phase=chosen,
            limit=limit,
            outcome=result,
        )

    events = with_store(url, tenant, action)
    if as_json:
        emit_json(events)
        return
    scope = f"session {session_id}" if session_id else f"tenant {tenant}"
    title = f"Compaction events of {scope}, newest first"
    print_table(events_table(events, title), empty=f"No compaction events of {scope}.")


def _strategy_name(name: str | None) -> str | None:
    """The recorded name of a strategy given by its short name (or as recorded)."""
    if name is None:
        return None
    from strategies.specs import strategy_name

    return strategy_name(name) or name


@click.command()
@click.argument("session_id", metavar="SESSION")
@url_option
@tenant_option
@json_option
def excluded(session_id: str, url: str | None, tenant: str, as_json: bool) -> None:
    """List a session's excluded groups and why."""

    on_terminal = not as_json and terminal_width() is not None

    async def action(store: HistoryBackend) -> tuple[list[ExcludedGroup], frozenset[str]]:
        from store.cli._ids import read_ids

        groups = await store.excluded(session_id)
        return groups, (await read_ids(store, session_id)).groups if on_terminal else frozenset()

    groups, known = with_store(url, tenant, action)
    if as_json:
        emit_json(groups)
        return
    title = f"Excluded groups of {session_id}, in projection order"
    table = excluded_table(groups, title, known)
    print_table(table, empty=f"Nothing of {session_id} is excluded.")


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("message_id", metavar="MESSAGE")
@url_option
@tenant_option
@json_option
def why(session_id: str, message_id: str, url: str | None, tenant: str, as_json: bool) -> None:
    """Say whether a message is sent to the model, and why.

    MESSAGE is the message's id, a unique start of it (as `show` shortens ids on a
    terminal), or its seq (the first column of `show`).
    """

    async def action(store: HistoryBackend) -> tuple[str, WhyResult]:
        from store.cli._ids import message_id as whole

        await store.session(session_id)  # SessionNotFound for an unknown id
        found = await whole(store, session_id, message_id)
        return found, await store.why(session_id, found)

    found, result = with_store(url, tenant, action)
    if as_json:
        emit_json(result)
        return
    verdict = "is sent" if result.in_context else "is not sent"
    echo(f"{found} {verdict}: {result.explanation}.")
    echo(f"group {result.group_id}" + (f", event {result.event_id}" if result.event_id else ""))
    if result.summary_group_id:
        echo(f"summary {result.summary_group_id} replaces it")
    if not result.in_context and result.event_id:
        echo(f"bring it back: chatledger restore {session_id} --group {result.group_id}")
