"""The read commands: ``sessions``, ``show``, ``audit`` and ``stats``."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from store.cli._common import (
    CliError,
    JsonOpt,
    TenantOpt,
    UrlOpt,
    console,
    emit_json,
    run,
    with_store,
)
from store.cli._render import (
    context_table,
    events_table,
    history_table,
    sessions_table,
    stats_table,
)
from store.contract import HistoryBackend
from store.models import PHASES, CompactionEvent, SessionInfo, Stats, StoredMessage
from strategies.messages import Message
from strategies.tokenizers import count_message_tokens

__all__ = ["audit", "parse_since", "sessions", "show", "stats"]

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, *, now: datetime | None = None) -> datetime:
    """An ISO 8601 date or time (UTC when naive), or an age such as ``30m``, ``2h``, ``7d``."""
    text = value.strip()
    match = _RELATIVE.match(text)
    if match:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        return (now or datetime.now(UTC)) - delta
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"invalid --since {value!r}: expected an ISO date/time or an age like 30m, 2h, 7d"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def sessions(
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many.")] = None,
    after: Annotated[str | None, typer.Option(help="Start after this session id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the tenant's sessions with stored and active counts."""

    async def action(store: HistoryBackend) -> list[SessionInfo]:
        return await store.sessions(limit=limit, after=after)

    found = run(with_store(url, tenant, action))
    if as_json:
        emit_json(found)
    elif not found:
        console.print(f"No sessions for tenant {tenant!r}.")
    else:
        console.print(sessions_table(found))


async def _context(store: HistoryBackend, session_id: str) -> tuple[list[Message], list[int]]:
    await store.session(session_id)  # SessionNotFound for an unknown id
    messages = await store.context(session_id)
    tokens = [count_message_tokens(m, store.tokenizer, policy=store.policy) for m in messages]
    return messages, tokens


def _show_context(url: str | None, tenant: str, session_id: str, as_json: bool) -> None:
    async def action(store: HistoryBackend) -> tuple[list[Message], list[int]]:
        return await _context(store, session_id)

    messages, tokens = run(with_store(url, tenant, action))
    if as_json:
        emit_json(messages)
        return
    title = f"Context of {session_id}: {len(messages)} messages, {sum(tokens):,} tokens"
    console.print(context_table(title, messages, tokens))


def show(
    session_id: Annotated[str, typer.Argument(metavar="SESSION", help="The session id.")],
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    show_all: Annotated[
        bool, typer.Option("--all", help="Include excluded messages (marked EXCLUDED).")
    ] = False,
    context: Annotated[
        bool,
        typer.Option("--context", help="Show what the model is sent (summaries, reductions)."),
    ] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Newest N messages only.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a session's stored messages (active ones by default)."""
    if show_all and context:
        raise CliError("--all and --context cannot be used together", exit_code=2)
    if context:
        _show_context(url, tenant, session_id, as_json)
        return

    async def action(store: HistoryBackend) -> list[StoredMessage]:
        if limit is None:
            return [m async for m in store.aiter_history(session_id, include_excluded=show_all)]
        newest = (await store.session(session_id)).stored_messages + 1  # seq is gapless
        return await store.history(
            session_id, include_excluded=show_all, limit=limit, before=newest
        )

    messages = run(with_store(url, tenant, action))
    if as_json:
        emit_json(messages)
        return
    excluded = sum(1 for m in messages if m.excluded)
    what = "stored" if show_all else "active"
    title = f"Session {session_id}: {len(messages)} {what} messages"
    if show_all:
        title += f", {excluded} excluded"
    console.print(history_table(title, messages))


def audit(
    session_id: Annotated[
        str | None, typer.Argument(metavar="[SESSION]", help="Only this session.")
    ] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    since: Annotated[
        str | None, typer.Option(help="ISO date/time, or an age such as 30m, 2h, 7d.")
    ] = None,
    strategy: Annotated[str | None, typer.Option(help="Only events of this strategy.")] = None,
    phase: Annotated[
        str | None, typer.Option(help=f"Only events of this phase ({', '.join(PHASES)}).")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List compaction events (newest first): what was excluded, when, by whom, why."""
    if phase is not None and phase not in PHASES:
        raise CliError(
            f"invalid --phase {phase!r}: expected one of {', '.join(PHASES)}", exit_code=2
        )
    moment = parse_since(since) if since is not None else None

    async def action(store: HistoryBackend) -> list[CompactionEvent]:
        return await store.audit(
            session_id,
            since=moment,
            strategy=strategy,
            phase=phase,  # narrowed to a Phase by the check against PHASES above
            limit=limit,
        )

    events = run(with_store(url, tenant, action))
    if as_json:
        emit_json(events)
    elif not events:
        console.print("No compaction events.")
    else:
        console.print(events_table(events))


def stats(
    session_id: Annotated[
        str | None, typer.Argument(metavar="[SESSION]", help="One session (default: tenant).")
    ] = None,
    url: UrlOpt = None,
    tenant: TenantOpt = "default",
    as_json: JsonOpt = False,
) -> None:
    """Stored versus active messages, groups and tokens, for a session or the tenant."""

    async def action(store: HistoryBackend) -> Stats:
        return await store.stats(session_id)

    result = run(with_store(url, tenant, action))
    if as_json:
        emit_json([result])
    else:
        console.print(stats_table(result))
