"""``chatledger doctor [SESSION] [--fix]``: check a database, repair what can be repaired.

What is checked and what ``--fix`` does is :mod:`store.sql.upkeep.doctor`. The command exits 0
when nothing is left to repair, 1 when something is (reported but not repairable, or
found without ``--fix``), so that scripts can act on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from store.cli._common import (
    CliError,
    emit_json,
    json_option,
    open_store,
    run,
    session_tokenizer,
    tenant_option,
    upkeep,
    url_option,
)
from store.cli._output import Column, Table, echo, print_table

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import DoctorReport
    from strategies.tokenizers import Tokenizer

__all__ = ["doctor"]


async def _doctor(
    url: str | None, tenant: str, session_id: str | None, fix: bool, tokenizer: Tokenizer | None
) -> DoctorReport:
    async def action(store: HistoryBackend) -> DoctorReport:
        return await upkeep(store).doctor(session_id, fix=fix)

    return await open_store(url, tenant, action, tokenizer=tokenizer)


@click.command()
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--fix", is_flag=True, help="Repair what can be repaired (each fix is audited).")
@url_option
@tenant_option
@json_option
def doctor(session_id: str | None, fix: bool, url: str | None, tenant: str, as_json: bool) -> None:
    """Check sessions for damage and inconsistencies; --fix repairs what it can."""
    # a quarantined row's placeholder is the one message doctor writes: counted with the
    # session's tokenizer when one session is checked, else with the default one
    tokenizer = None if session_id is None else session_tokenizer(url, tenant, session_id)
    report = run(_doctor(url, tenant, session_id, fix, tokenizer))
    if as_json:
        emit_json({**report.model_dump(mode="json"), "healthy": report.healthy})
    else:
        table = Table(
            f"{len(report.findings)} findings in {report.sessions} sessions of tenant "
            f"{report.tenant}",
            [
                Column("session", constant=True),
                Column("check"),
                Column("fix"),
                Column("detail", flex=True),
            ],
        )
        for f in report.findings:
            state = "fixed" if f.fixed else ("--fix" if f.fixable else "no")
            table.add(f.session_id, f.check, state, f.detail)
        print_table(table, empty=f"checked {report.sessions} sessions: nothing to repair")
    if not report.healthy:
        left = sum(1 for f in report.findings if not f.fixed)
        raise CliError(f"{left} findings left" + ("" if fix else " (try --fix)"))
    if not as_json and report.findings:
        echo("every finding was repaired")
