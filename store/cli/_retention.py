"""The commands that erase: ``purge`` (whole sessions past a retention period) and
``redact`` (messages replaced by tombstones).

Both ask first unless ``--yes`` is given (and refuse without a terminal), both take
``--dry-run`` (what would go, nothing written), and both take ``--vacuum`` to rebuild
the database file afterwards (see ``docs/retention.md``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from store.cli._common import (
    CliError,
    confirm,
    emit_json,
    encryption_options,
    json_option,
    parse_since,
    run,
    session_tokenizer,
    tenant_option,
    upkeep,
    url_option,
    yes_option,
)
from store.cli._output import Column, Table, echo, number, print_table, quantity, when

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import PurgeReport, RedactReport, StoredMessage
    from strategies.tokenizers import Tokenizer

__all__ = ["purge", "redact"]

_VACUUM_HELP = "Afterwards, rebuild the database file (VACUUM): returns the space, takes a lock."


async def _open(url: str | None, tenant: str, tokenizer: Tokenizer | None = None) -> HistoryBackend:
    from store.sql.store import HistoryStore

    keys = encryption_options()
    return await HistoryStore.open(url, tenant=tenant, create=False, tokenizer=tokenizer, **keys)


def _cutoff(value: str) -> datetime:
    try:
        return parse_since(value, now=datetime.now(UTC))
    except CliError:
        raise CliError(
            f"invalid --older-than {value!r}: expected an ISO date/time or an age like 30d, 12h",
            exit_code=2,
        ) from None


async def _purge(
    url: str | None, tenant: str, cutoff: datetime, *, dry_run: bool, vacuum: bool
) -> PurgeReport:
    store = await _open(url, tenant)
    try:
        report = await store.purge(older_than=cutoff, dry_run=dry_run)
        if vacuum and not dry_run:
            await upkeep(store).vacuum()
        return report
    finally:
        await store.aclose()


def _purge_line(report: PurgeReport, verb: str) -> str:
    calls = f", {quantity(report.usage_calls, 'model call')}" if report.usage_calls else ""
    return (
        f"{verb} {quantity(len(report.sessions), 'session')} "
        f"({quantity(report.messages, 'message')}, "
        f"{quantity(report.groups, 'group')}, {quantity(report.events, 'audit event')}{calls}) "
        f"of tenant {report.tenant} last updated before {when(report.older_than)}"
    )


@click.command()
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE|TIME",
    help="Remove sessions last updated before this: an age (30d, 12h) or an ISO date/time.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be removed; remove nothing.")
@yes_option
@click.option("--vacuum", is_flag=True, help=_VACUUM_HELP)
@url_option
@tenant_option
@json_option
def purge(
    older_than: str,
    dry_run: bool,
    yes: bool,
    vacuum: bool,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Remove a tenant's sessions last updated before a time, with everything they hold."""
    cutoff = _cutoff(older_than)
    preview = run(_purge(url, tenant, cutoff, dry_run=True, vacuum=False))
    if not dry_run and preview.sessions:
        confirm(_purge_line(preview, "Remove") + " for good?", yes=yes)
        report = run(_purge(url, tenant, cutoff, dry_run=False, vacuum=vacuum))
    else:
        report = preview.model_copy(update={"dry_run": dry_run})
    if as_json:
        emit_json(report)
        return
    echo(_purge_line(report, "would remove" if dry_run else "removed"))
    for session_id in report.sessions:
        echo(f"  {session_id}")


async def _targets(store: HistoryBackend, session_id: str, ids: list[str]) -> list[StoredMessage]:
    """The messages ``ids`` name (whole ids, unique starts or seqs): :class:`CliError`
    when one names none."""
    from store.cli._ids import read_ids

    known = await read_ids(store, session_id)
    wanted = {known.message(typed) for typed in ids}
    found = [
        m
        async for m in store.aiter_history(session_id, include_excluded=True)
        if m.message_id in wanted
    ]
    unknown = sorted(wanted - {m.message_id for m in found})
    if unknown:
        raise CliError(f"unknown message ids in session {session_id!r}: {', '.join(unknown)}")
    return found


async def _redact(
    url: str | None,
    tenant: str,
    session_id: str,
    ids: list[str],
    reason: str,
    tokenizer: Tokenizer,
    *,
    dry_run: bool,
    vacuum: bool,
) -> tuple[list[StoredMessage], RedactReport | None]:
    store = await _open(url, tenant, tokenizer)
    try:
        targets = await _targets(store, session_id, ids)
        if dry_run:
            return targets, None
        report = await store.redact(session_id, ids, reason=reason)
        if vacuum:
            await upkeep(store).vacuum()
        return targets, report
    finally:
        await store.aclose()


def _preview(messages: list[StoredMessage], title: str) -> None:
    table = Table(
        title,
        [
            Column("seq", "right"),
            Column("message", ids=True),
            Column("role"),
            Column("text", flex=True),
        ],
    )
    for m in messages:
        table.add(str(m.seq), m.message_id, m.role, m.message.text.replace("\n", " "))
    print_table(table, empty="no messages")


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("message_ids", metavar="MESSAGE...", nargs=-1, required=True)
@click.option("--reason", required=True, help="Why the messages are redacted (audited).")
@click.option("--dry-run", is_flag=True, help="Show the messages that would be redacted.")
@yes_option
@click.option("--vacuum", is_flag=True, help=_VACUUM_HELP)
@url_option
@tenant_option
@json_option
def redact(
    session_id: str,
    message_ids: tuple[str, ...],
    reason: str,
    dry_run: bool,
    yes: bool,
    vacuum: bool,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Replace messages by tombstones (role, call ids and pairing kept), for good."""
    if not reason.strip():
        raise CliError("--reason is blank: say why the messages are redacted", exit_code=2)
    tokenizer = session_tokenizer(url, tenant, session_id)
    ids = list(dict.fromkeys(message_ids))
    targets, _ = run(
        _redact(url, tenant, session_id, ids, reason, tokenizer, dry_run=True, vacuum=False)
    )
    ids = list(dict.fromkeys(m.message_id for m in targets))
    if dry_run:
        if as_json:
            emit_json({"session_id": session_id, "dry_run": True, "would_redact": ids})
        else:
            _preview(targets, f"would redact {len(targets)} messages of {session_id}")
        return
    confirm(
        f"Redact {quantity(len(ids), 'message')} of session {session_id} "
        f"(tenant {tenant}) for good?",
        yes=yes,
    )
    _, report = run(
        _redact(url, tenant, session_id, ids, reason, tokenizer, dry_run=False, vacuum=vacuum)
    )
    assert report is not None
    if as_json:
        emit_json(report)
    else:
        _show_redaction(report)
    if not report.complete:
        raise click.exceptions.Exit(1)


def _show_redaction(report: RedactReport) -> None:
    echo(
        f"redacted {quantity(len(report.redacted), 'message')} and "
        f"{quantity(len(report.summaries), 'summary', 'summaries')} of {report.session_id}: "
        f"{number(report.tokens_before)} → "
        f"{number(report.tokens_after)} stored tokens"
        + (f" (event {report.event.id})" if report.event is not None else "")
    )
    if report.leftovers:
        echo(
            "erased what an earlier redaction left of " + quantity(len(report.leftovers), "message")
        )
    if not report.complete:
        echo(
            "warning: the redacted text may still be in the database's write-ahead log "
            "(another connection is reading it): run this again, or chatledger doctor "
            "--fix, when nothing else reads",
            err=True,
        )
