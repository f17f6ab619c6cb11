"""Reading back the ids a person types: a whole id, or a unique start of one (as a table
on a terminal shows it, :mod:`store.cli._prefix`), and for a message its ``seq`` too.

A whole id is always looked up first: a prefix or a number is read as one only when no
id is stored that is exactly what was typed. A prefix that starts more than one id is
refused with the ids it starts (a usage error, exit 2); one that starts none is passed
on as typed, so that the store says it is not found in its own words.

Every command's ``SESSION`` argument is read this way by :func:`accepting_prefixes`
(which :mod:`store.cli` applies to each command as it loads); message, group and event
ids by the functions here, inside the command that has the store open.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from store.cli._common import CliError, with_store
from store.cli._prefix import matching
from store.errors import SessionNotFound

if TYPE_CHECKING:
    from store.contract import HistoryBackend

__all__ = [
    "Ids",
    "accepting_prefixes",
    "event_id",
    "group_ids",
    "message_id",
    "read_ids",
    "session_id",
    "session_ids",
]

F = TypeVar("F", bound=Callable[..., Any])
SHOWN = 5
"""How many of the ids an ambiguous prefix starts an error names."""
PREFIXED = "_chatledger_reads_prefixes"
"""Marks a command's callback that already reads its session as a prefix."""


def _one(typed: str, ids: Iterable[str], what: str) -> str:
    found = matching(typed, ids)
    if len(found) > 1:
        named = ", ".join(found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
        raise CliError(
            f"{what} {typed!r} is the start of {len(found)} ids ({named}): type more of it",
            exit_code=2,
        )
    return found[0] if found else typed


@dataclass(frozen=True)
class Ids:
    """A session's message ids (and ``seq`` of each) and group ids, excluded included."""

    messages: dict[str, int]
    groups: frozenset[str]

    def message(self, typed: str) -> str:
        """The message ``typed`` names: its id, a unique start of one, or its ``seq``."""
        if typed in self.messages:
            return typed
        if typed.isdigit():
            by_seq = {seq: mid for mid, seq in self.messages.items()}
            if int(typed) in by_seq:
                return by_seq[int(typed)]
        return _one(typed, self.messages, "message")

    def group(self, typed: str) -> str:
        """The group ``typed`` names: its id or a unique start of one."""
        return _one(typed, self.groups, "group")


async def read_ids(store: HistoryBackend, session_id: str) -> Ids:
    """Every message and group id of a session (excluded ones too)."""
    messages: dict[str, int] = {}
    groups: set[str] = set()
    async for stored in store.aiter_history(session_id, include_excluded=True):
        messages.setdefault(stored.message_id, stored.seq)
        groups.add(stored.group_id)
    return Ids(messages, frozenset(groups))


async def message_id(store: HistoryBackend, session_id: str, typed: str) -> str:
    """The message of ``session_id`` that ``typed`` names (id, unique start, or seq)."""
    return (await read_ids(store, session_id)).message(typed)


async def group_ids(store: HistoryBackend, session_id: str, typed: Iterable[str]) -> list[str]:
    """The groups of ``session_id`` that ``typed`` name (ids or unique starts)."""
    ids = await read_ids(store, session_id)
    return [ids.group(g) for g in typed]


async def event_id(store: HistoryBackend, session_id: str, typed: str) -> str:
    """The event of ``session_id`` that ``typed`` names (its id or a unique start)."""
    return _one(typed, [e.id for e in await store.audit(session_id)], "event")


async def session_ids(store: HistoryBackend) -> frozenset[str]:
    """Every session id of the store's tenant."""
    return frozenset(s.session_id for s in await store.sessions())


async def session_id(store: HistoryBackend, typed: str) -> str:
    """The session ``typed`` names: its id or a unique start of one."""
    try:
        await store.session(typed)
    except SessionNotFound:
        return _one(typed, await session_ids(store), "session")
    return typed


def accepting_prefixes(command: click.Command) -> click.Command:
    """``command`` with its ``SESSION`` argument read by :func:`_retrying` (once, however
    often it is loaded)."""
    callback = command.callback
    takes = any(p.name == "session_id" for p in command.params)
    if takes and callback is not None and not getattr(callback, PREFIXED, False):
        command.callback = _retrying(callback)
        setattr(command.callback, PREFIXED, True)
    return command


def _retrying(callback: F) -> F:
    """``callback`` (a command's) reading its ``session_id`` as a whole id first, and
    when no such session is stored, as the unique start of one: the command runs again
    with the whole id. (A session that is not found is reported before anything is
    written, so running again is safe.)"""

    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except SessionNotFound as error:
            typed = kwargs.get("session_id")
            if not isinstance(typed, str) or error.session_id != typed:
                raise

            async def whole(store: HistoryBackend) -> str:
                return await session_id(store, typed)

            found = with_store(kwargs.get("url"), kwargs.get("tenant", "default"), whole)
            if found == typed:
                raise
            return callback(*args, **{**kwargs, "session_id": found})

    return cast(F, wrapper)
