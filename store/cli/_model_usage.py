"""The usage command: ``chatledger usage [SESSION] [--since WHEN] [--by model|session|day]
[--prices FILE]`` (a module not named ``_usage``: importing it would hide
:func:`store.cli._usage`, the package's handler of usage errors).

What the recorded model calls cost, as their providers reported it
(:meth:`~store.contract.HistoryBackend.usage`), beside what chatledger counted it sent,
row by row, with the cache-prefix breaks and, with ``--prices``, the cost.

A session with no recorded call gives an empty report (a call may be recorded before
the session's first message is stored, so a session id that no message has yet is
reported too, when it has calls); an id that is neither stored nor has calls is an
unknown session. Prices naming no model of a call leave that call out of ``cost``
(``unpriced_calls``), which a line on stderr says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from store.cli._common import (
    emit_json,
    json_option,
    parse_since,
    prices_option_value,
    tenant_option,
    url_option,
    with_store,
)
from store.cli._output import echo, print_table

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.usage import UsageReport

__all__ = ["GROUPINGS", "usage"]

GROUPINGS = ("model", "session", "day")
"""What the rows may be keyed by (``store.usage.USAGE_GROUPINGS``, without importing the
store)."""


@click.command()
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--since", metavar="WHEN", help="Only calls since: ISO time or 30m, 2h, 7d.")
@click.option(
    "--by",
    type=click.Choice(GROUPINGS),
    default="model",
    show_default=True,
    help="What each row totals: a model, a session or a day (UTC).",
)
@click.option(
    "--prices",
    metavar="FILE",
    help="Prices per million tokens, TOML or JSON: {model: {input, output, cache_read, "
    "cache_write}} (docs/cli.md); adds the cost.",
)
@url_option
@tenant_option
@json_option
def usage(
    session_id: str | None,
    since: str | None,
    by: str,
    prices: str | None,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Show what the recorded model calls used and cost, by model, session or day."""
    moment = parse_since(since) if since is not None else None
    table = prices_option_value(prices)

    async def action(store: HistoryBackend) -> tuple[UsageReport, list[str]]:
        from store.errors import SessionNotFound

        found = await store.usage(session_id, since=moment, by=by, prices=table)
        if session_id is not None and not found.total.calls:
            try:
                await store.session(session_id)
            except SessionNotFound:
                if not await store.usage_calls(session_id):
                    raise
        unpriced: list[str] = []
        if table is not None and found.total.unpriced_calls:
            models = await store.usage(session_id, since=moment, by="model", prices=table)
            unpriced = [row.key for row in models.rows if row.unpriced_calls]
        return found, unpriced

    report, unpriced = with_store(url, tenant, action)
    if as_json:
        emit_json(report)
    else:
        from store.cli._render import usage_table

        scope = f"session {session_id}" if session_id else f"tenant {tenant}"
        after = f" since {_when(report)}" if report.since is not None else ""
        title = f"Model calls of {scope}{after}, by {report.by}"
        print_table(usage_table(report, title), empty=f"No model calls of {scope}{after}.")
    if unpriced:
        calls = report.total.unpriced_calls
        echo(
            f"{calls:,} call{'s' if calls != 1 else ''} left out of cost: {prices} has no "
            f"price for {', '.join(unpriced)}",
            err=True,
        )


def _when(report: UsageReport) -> str:
    from store.cli._output import when

    return when(report.since)
