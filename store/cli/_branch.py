"""The branch commands: ``fork``, ``rewind`` and ``branches`` (``docs/branches.md``).

A fork is a new session that shares its parent's history up to a message; a rewind
sets a session's messages after one aside as a superseded tail, which ``restore
--event`` brings back. ``rewind`` asks first, as ``delete`` does; ``--to-start`` rewinds
to before the first message (the API's ``rewind(session, to=None)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from store.cli._common import (
    CliError,
    confirm,
    emit_json,
    json_option,
    session_tokenizer,
    tenant_option,
    url_option,
    with_store,
    yes_option,
)
from store.cli._output import echo, number, print_table, quantity
from store.cli._render import branches_table, inherited

if TYPE_CHECKING:
    from store.contract import HistoryBackend
    from store.models import BranchInfo, CompactionEvent, SessionInfo

__all__ = ["branches", "fork", "rewind"]


@dataclass(frozen=True)
class Forked:
    """A new fork and the event that says what it inherited."""

    info: SessionInfo
    event: CompactionEvent | None


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--at",
    metavar="MESSAGE",
    help="The last message the fork takes (default: the session's last; a message of one "
    "of its superseded tails is allowed).",
)
@click.option(
    "--as",
    "new_session_id",
    metavar="NEW_ID",
    help="The fork's session id (default: fork- and 32 hex digits).",
)
@url_option
@tenant_option
@json_option
def fork(
    session_id: str,
    at: str | None,
    new_session_id: str | None,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Start a new session from a session's history up to a message (a branch).

    No message is copied: the fork shares the stored messages with its parent, with
    their exclusions, summaries, reductions and pins, and goes on on its own.
    """

    async def action(store: HistoryBackend) -> Forked:
        from store.cli._ids import message_id

        await store.session(session_id)  # SessionNotFound for an unknown id
        cut = await message_id(store, session_id, at) if at is not None else None
        info = await store.fork(session_id, at=cut, new_session_id=new_session_id)
        events = await store.audit(info.session_id, phase="fork")
        return Forked(info, events[0] if events else None)

    forked = with_store(url, tenant, action, tokenizer=session_tokenizer(url, tenant, session_id))
    if as_json:
        emit_json(forked.info)
        return
    info = forked.info
    cut = f" at {info.fork_message_id}" if info.fork_message_id is not None else " (empty)"
    echo(f"forked {session_id}{cut} as {info.session_id}")
    echo(
        f"{quantity(info.stored_messages, 'message')}, {number(info.stored_tokens)} tokens "
        f"({number(info.active_tokens)} active)"
        + (f"; inherited {inherited(forked.event.params)}" if forked.event is not None else "")
    )


@dataclass(frozen=True)
class Cut:
    """What a rewind would set aside."""

    after: int
    """Appended messages after the cut (what the rewind sets aside)."""
    to: str | None
    """The whole id of the message rewound to (None: to the start)."""


async def _cut(store: HistoryBackend, session_id: str, to: str | None) -> Cut:
    """Read the session for the confirmation: :class:`CliError` when ``to`` is not one of
    its messages (the store refuses the other bad cuts)."""
    from store.cli._ids import message_id

    await store.session(session_id)  # SessionNotFound for an unknown id
    if to is not None:
        to = await message_id(store, session_id, to)
    cut = 0 if to is None else None
    after = 0
    async for stored in store.aiter_history(session_id, include_excluded=True):
        if stored.kind == "summary":
            if stored.message_id == to:
                raise CliError(f"{to!r} is a summary: rewind to a message of the conversation")
        elif stored.message_id == to:
            cut = stored.seq
        elif cut is not None and stored.seq > cut:
            after += 1
    if cut is None:
        raise CliError(f"no message {to!r} in session {session_id!r}")
    return Cut(after, to)


@click.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--to", metavar="MESSAGE", help="The last message the session keeps.")
@click.option(
    "--to-start",
    is_flag=True,
    help="Rewind to before the first message: every message is set aside.",
)
@yes_option
@url_option
@tenant_option
@json_option
def rewind(
    session_id: str,
    to: str | None,
    to_start: bool,
    yes: bool,
    url: str | None,
    tenant: str,
    as_json: bool,
) -> None:
    """Set aside a session's messages after a message; restore brings them back (asks first).

    The messages after --to leave the session's history and context; they are kept
    under a tail id (`chatledger branches SESSION`), and `chatledger restore SESSION
    --event EVENT` brings them back.
    """
    if (to is None) == (not to_start):
        raise CliError("give --to MESSAGE or --to-start", exit_code=2)
    tokenizer = session_tokenizer(url, tenant, session_id)

    async def read(store: HistoryBackend) -> Cut:
        return await _cut(store, session_id, to)

    cut = with_store(url, tenant, read, tokenizer=tokenizer)
    to = cut.to
    where = f"to {to}" if to is not None else "to the start"
    if cut.after:
        confirm(
            f"Rewind session {session_id} (tenant {tenant}) {where}, setting "
            f"{quantity(cut.after, 'message')} aside as a tail?",
            yes=yes,
        )

    async def action(store: HistoryBackend) -> CompactionEvent | None:
        return await store.rewind(session_id, to=to)

    event = with_store(url, tenant, action, tokenizer=tokenizer)
    if as_json:
        emit_json(event)
    elif event is None:
        after = f" after {to}" if to is not None else ""
        echo(f"Nothing to rewind: {session_id} holds no message{after}.")
    else:
        moved = event.params.get("messages", cut.after)
        tail = event.params.get("tail_session_id")
        count = quantity(moved, "message") if isinstance(moved, int) else "messages"
        echo(f"event {event.id}: rewound {session_id} {where}; {count} set aside as tail {tail}")
        echo(f"bring them back: chatledger restore {session_id} --event {event.id}")


@click.command()
@click.argument("session_id", metavar="SESSION")
@url_option
@tenant_option
@json_option
def branches(session_id: str, url: str | None, tenant: str, as_json: bool) -> None:
    """List a session's parent, forks and superseded tails."""

    async def action(store: HistoryBackend) -> list[BranchInfo]:
        return await store.branches(session_id)

    found = with_store(url, tenant, action)
    if as_json:
        emit_json(found)
        return
    title = f"Branches of {session_id}: its parent, forks and tails, each oldest first"
    print_table(
        branches_table(found, title),
        empty=f"{session_id} has no parent, fork or superseded tail.",
    )
