"""The read commands: ``sessions``, ``tenants``, ``show`` and ``stats``.

Reads never write: a database without chatledger's schema (an empty file, another
application's database) is refused without a table being created in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from store.cli._common import (
    CliError,
    emit_json,
    json_option,
    parse_since,
    run,
    session_tokenizer,
    strategy_option_value,
    tenant_option,
    tokenizer_option_value,
    url_option,
    with_store,
)
from store.cli._output import echo, print_table, quantity, terminal_width
from store.cli._render import (
    context_table,
    fork_of,
    history_table,
    sessions_table,
    stats_table,
)

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import SessionInfo, Stats, StoredMessage
    from strategies.messages import Message

__all__ = ["sessions", "show", "stats", "tenants"]


@click.command()
@click.option(
    "--since", metavar="WHEN", help="Only sessions updated since: ISO time or 30m, 2h, 7d."
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N sessions.")
@click.option("--after", metavar="SESSION", help="The page after this session (keyset paging).")
@url_option
@tenant_option
@json_option
def sessions(
    since: str | None,
    limit: int | None,
    after: str | None,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """List the tenant's sessions, most recently updated first."""
    moment = parse_since(since) if since is not None else None

    on_terminal = not as_json and terminal_width() is not None

    async def action(store: HistoryBackend) -> tuple[list[SessionInfo], frozenset[str]]:
        from store.cli._ids import session_ids

        found = await store.sessions(
            limit=limit, after=after, updated_since=moment, order="updated"
        )
        return found, await session_ids(store) if on_terminal else frozenset()

    found, known = with_store(url, tenant, action)
    if as_json:
        emit_json(found)
        return
    title = f"Sessions of tenant {tenant}, newest first"
    table = sessions_table(found, title, known)
    print_table(table, empty=f"No sessions for tenant {tenant!r}.")


@click.command()
@url_option
@json_option
def tenants(url: str | None, as_json: bool) -> None:
    """List every tenant of the database (for administrators)."""
    from store.admin import list_tenants
    from store.cli._render import tenants_table

    found = run(list_tenants(url))
    if as_json:
        emit_json(found)
    else:
        print_table(tenants_table(found), empty="No tenants: the database holds no session.")


NEWEST = 2**63 - 1
"""A ``before`` bound past every ``seq``: with ``limit``, the newest messages (a fork's
numbers have gaps, so the count of its messages is no bound)."""


@dataclass(frozen=True)
class Shown:
    """What ``show`` prints of a session's stored history."""

    info: SessionInfo
    messages: list[StoredMessage]
    pinned: frozenset[str]
    cut: int | None
    """The ``seq`` of a fork's cut in its history (0 for a fork of an empty session; None
    when not a fork, or when the cut has left its history)."""
    known: frozenset[str]
    """Every message id of the session, when a terminal may shorten them (else empty)."""


async def _cut_seq(store: HistoryBackend, info: SessionInfo) -> int | None:
    if info.parent_session_id is None and info.fork_message_id is None:
        return None
    if info.fork_message_id is None:
        return 0
    history = store.aiter_history(info.session_id, include_excluded=True)
    async for stored in history:
        if stored.message_id == info.fork_message_id and stored.kind != "summary":
            await _close(history)
            return stored.seq
    return None


async def _close(iterator: object) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


async def _stored(
    store: HistoryBackend, session_id: str, *, show_all: bool, limit: int | None, ids: bool
) -> Shown:
    info = await store.session(session_id)  # SessionNotFound for an unknown id
    if limit is None:
        found = [m async for m in store.aiter_history(session_id, include_excluded=show_all)]
    else:
        found = await store.history(
            session_id, include_excluded=show_all, limit=limit, before=NEWEST
        )
    view = await store.view(session_id)
    pinned = frozenset(g.group_id for g in view.groups if g.pinned)
    known: frozenset[str] = frozenset()
    if ids:
        from store.cli._ids import read_ids

        known = frozenset((await read_ids(store, session_id)).messages)
    return Shown(info, found, pinned, await _cut_seq(store, info), known)


def _show_stored(
    url: str | None, tenant: str, session_id: str, show_all: bool, limit: int | None, as_json: bool
) -> None:
    async def action(store: HistoryBackend) -> Shown:
        on_terminal = not as_json and terminal_width() is not None
        return await _stored(store, session_id, show_all=show_all, limit=limit, ids=on_terminal)

    counted = session_tokenizer(url, tenant, session_id)  # its view checks the tokenizer
    shown = with_store(url, tenant, action, tokenizer=counted)
    messages = shown.messages
    if as_json:
        emit_json(messages)
        return
    what = "stored" if show_all else "active"
    named = f" ({shown.info.title})" if shown.info.title is not None else ""
    title = f"Session {session_id}{named}: {len(messages)} {what} messages, in projection order"
    if show_all:
        title += f", {sum(1 for m in messages if m.excluded)} excluded"
    origin = fork_of(shown.info)
    fork = (origin, shown.cut) if origin is not None and shown.cut is not None else None
    whole = limit is None or len(messages) < limit
    table = history_table(title, messages, shown.pinned, fork=fork, whole=whole, known=shown.known)
    if origin is not None and not table.rules:  # no row to mark: the title says it
        table.title += f" ({origin})"
    print_table(table, empty=f"Session {session_id} is empty.")


async def _context(
    store: HistoryBackend, session_id: str, spec: str | None, limit: int | None
) -> tuple[list[Message], list[int], frozenset[str], str]:
    from store.provider import BEFORE_STRATEGY_KEY

    await store.session(session_id)  # SessionNotFound for an unknown id
    if spec is not None:
        source = f"strategy {spec}"
    else:
        recorded = (await store.get_metadata(session_id)).get(BEFORE_STRATEGY_KEY)
        spec = recorded if isinstance(recorded, str) else None
        source = (
            f"the provider's strategy {spec}"
            if spec is not None
            else "no strategy known: the active messages as stored"
        )
    messages = await store.context(session_id, strategy=spec)
    summaries = frozenset(
        m.message_id for m in await store.history(session_id) if m.kind == "summary"
    )
    if limit is not None:
        messages = messages[-limit:]
    return messages, [store.count_tokens(m) for m in messages], summaries, source


def _show_context(
    url: str | None,
    tenant: str,
    session_id: str,
    spec: str | None,
    limit: int | None,
    tokenizer: str | None,
    as_json: bool,
) -> None:
    async def action(store: HistoryBackend) -> tuple[list[Message], list[int], frozenset[str], str]:
        return await _context(store, session_id, spec, limit)

    counted = (
        tokenizer_option_value(tokenizer)
        if tokenizer is not None
        else session_tokenizer(url, tenant, session_id)
    )
    messages, tokens, summaries, source = with_store(url, tenant, action, tokenizer=counted)
    if as_json:
        emit_json(messages)
        return
    title = (
        f"Context of {session_id}: {quantity(len(messages), 'message')}, "
        f"{quantity(sum(tokens), 'token')}"
    )
    print_table(context_table(title, messages, tokens, summaries), empty="The context is empty.")
    echo(f"(projected with {source.replace(',', ', ')})")  # breaks between parameters


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--all", "show_all", is_flag=True, help="Include excluded messages.")
@click.option("--context", is_flag=True, help="Show what the model is sent next.")
@click.option(
    "--strategy",
    metavar="SPEC",
    help="With --context: project with this strategy (default: the one the provider recorded).",
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="The newest N only.")
@click.option(
    "--tokenizer", metavar="NAME", help="Count with NAME (default: the session's tokenizer)."
)
@url_option
@tenant_option
@json_option
def show(
    session_id: str,
    show_all: bool,
    context: bool,
    strategy: str | None,
    limit: int | None,
    tokenizer: str | None,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Show a session's messages, or what the model is sent next.

    Summaries are listed where they replace what they summarize; excluded messages
    (with --all), reduced ones and pinned groups are marked; in a fork, a line marks
    where its own messages start.
    """
    if show_all and context:
        raise CliError("--all and --context cannot be used together", exit_code=2)
    if strategy is not None and not context:
        raise CliError("--strategy needs --context", exit_code=2)
    if context:
        spec = strategy_option_value(strategy) if strategy is not None else None
        _show_context(url, tenant, session_id, spec, limit, tokenizer, as_json)
    else:
        _show_stored(url, tenant, session_id, show_all, limit, as_json)


@click.command()
@click.argument("session_id", metavar="[SESSION]", required=False)
@url_option
@tenant_option
@json_option
def stats(session_id: str | None, url: str | None, tenant: str, as_json: bool) -> None:
    """Stored versus active totals of a session or the tenant."""

    async def action(store: HistoryBackend) -> Stats:
        return await store.stats(session_id)

    result = with_store(url, tenant, action)
    if as_json:
        emit_json(result)
    else:
        print_table(stats_table(result), empty="")
