"""The visual audit command: ``chatledger report SESSION [-o FILE] [--prices FILE]``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from store.cli._common import (
    prices_option_value,
    session_tokenizer,
    tenant_option,
    url_option,
    with_store,
)
from store.cli._files import default_file_name
from store.cli._output import echo

if TYPE_CHECKING:
    from store.contract import HistoryBackend

__all__ = ["REPORT_SUFFIX", "report"]

REPORT_SUFFIX = ".report.html"
"""What the default file name adds to the session id."""


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Where to write the page (default: SESSION.report.html here; an id that is not "
    "a safe file name is reduced to one, with a hash of it).",
)
@click.option(
    "--prices",
    metavar="FILE",
    help="Prices per million tokens, TOML or JSON (as `chatledger usage --prices`): adds "
    "the cost of each turn's model calls.",
)
@url_option
@tenant_option
def report(
    session_id: str, output: Path | None, prices: str | None, url: str | None, tenant: str
) -> None:
    """Write a session's visual audit: one self-contained HTML page."""
    target = output if output is not None else Path(default_file_name(session_id, REPORT_SUFFIX))
    table = prices_option_value(prices)

    async def action(store: HistoryBackend) -> Path:
        from store.report import write_report

        return await write_report(store, session_id, target, prices=table)

    tokenizer = session_tokenizer(url, tenant, session_id)
    written = with_store(url, tenant, action, tokenizer=tokenizer)
    echo(f"wrote {written}: the audit of session {session_id}; open it in a browser")
