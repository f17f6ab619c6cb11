"""A source read as the importer reads it, in every pass: its conversations grouped in
*reads*, and the ids of what the source left without one.

A read is one session as one source gives it, from its start: a conversation, with the
runs that continue it (a database session or a file of Responses items, handed on a
thousand messages at a time). Reads are numbered in the order the sources are read, so
that every pass (each reads the sources again, and they read the same) names the same
read by the same number: what pass one decides about a read, pass two follows.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from store.formats import ORIGINAL_ID_KEY
from store.importing import ids
from store.importing.readers import READERS
from store.importing.source import Conversation, Located, Location
from strategies.messages import Message

__all__ = ["Chunk", "Plan", "chunks", "identified", "made_by_importer"]


@dataclass(slots=True)
class Plan:
    """One source of an import, with its format."""

    fmt: str
    source: str
    """The file or database, as the user named it (a URL's password hidden)."""
    path: Location
    first_read: int = 0
    """The number of its first read (set as pass one reaches it)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One conversation of a source, as a part of its read."""

    read: int
    """The read's number in the import."""
    begins: bool
    """Whether the conversation starts the read (else it continues the one before)."""
    session_id: str
    """The session id by this release's scheme (an earlier scheme may be kept: see
    :mod:`store.importing.ids`)."""
    conversation: Conversation
    start: int
    """The position in the read of the conversation's first message."""


def _continues(before: Conversation, after: Conversation) -> bool:
    """Whether ``after`` is the next run of the conversation ``before`` (a streamed
    session handed on in runs) rather than a conversation of its own."""
    if before.error is not None or after.error is not None:
        return False
    if before.source_session != after.source_session:
        return False
    return before.where == after.where or (before.stored_ids and after.stored_ids)


def _session_id(fmt: str, conversation: Conversation, prefix: str) -> str:
    if conversation.source_session is not None:
        return prefix + conversation.source_session
    first = conversation.messages[0].message if conversation.messages else None
    return ids.session_id_for(fmt, conversation.where, first, prefix)


def chunks(plan: Plan, prefix: str, table: str | None) -> Generator[Chunk]:
    """The plan's conversations as parts of reads numbered from ``plan.first_read``;
    ``prefix`` is put before every session id."""
    read = plan.first_read - 1
    before: Conversation | None = None
    session_id = ""
    position = 0
    for conversation in READERS[plan.fmt](plan.path, plan.source, table):
        begins = before is None or not _continues(before, conversation)
        if begins:
            read += 1
            position = 0
            session_id = _session_id(plan.fmt, conversation, prefix)
        yield Chunk(read, begins, session_id, conversation, position)
        position += len(conversation.messages)
        before = conversation


def made_by_importer(conversation: Conversation, message: Message) -> bool:
    """Whether the importer names ``message`` (its source gave it no id)."""
    return not conversation.stored_ids and ORIGINAL_ID_KEY in message.metadata


def identified(fmt: str, chunk: Chunk, session_id: str, *, legacy: bool) -> list[Located]:
    """The chunk's messages, those without an id of their own named by
    :func:`~store.importing.ids.message_id_for` (by the earlier scheme with
    ``legacy``). ``session_id`` is the session's id as imported."""
    conversation = chunk.conversation
    if conversation.stored_ids:
        return conversation.messages
    key = conversation.source_session or session_id
    found: list[Located] = []
    for offset, located in enumerate(conversation.messages):
        message = located.message
        if ORIGINAL_ID_KEY not in message.metadata:
            found.append(located)
            continue
        if legacy:
            message_id = ids.legacy_message_id(fmt, key, located.where)
        else:
            message_id = ids.message_id_for(fmt, key, chunk.start + offset, message)
        found.append(Located(message.model_copy(update={"message_id": message_id}), located.where))
    return found
