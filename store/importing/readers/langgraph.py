"""``langgraph``: LangGraph checkpoint databases (``SqliteSaver``'s SQLite file,
``PostgresSaver``'s PostgreSQL database), read-only, without LangGraph.

Each thread (``thread_id``, in the root namespace ``checkpoint_ns = ''``) is one
session. Its messages are the channel's (``messages`` unless the import names another
channel) along the chain of its newest checkpoint: from the newest (the greatest
``checkpoint_id``, as LangGraph finds it) through ``parent_checkpoint_id`` back to the
first. Every message any checkpoint of the chain held is imported, in the order the
checkpoints hold them (a message first seen in a later checkpoint is placed after the
message before it there, else before the one after it, else last); those the newest
checkpoint no longer holds (a trimming or summarizing node removed them with
``RemoveMessage``) are excluded by the import event, so the imported context is the
newest checkpoint's channel. A message's newest version is imported; its time is that
of the first checkpoint that held it (``ts``). Checkpoints off the chain (branches
left by time travel) and pending writes are not read; the first are counted in the
report's warnings.

A channel's value is in the checkpoint itself (``SqliteSaver``: the whole checkpoint
as MessagePack) or in ``checkpoint_blobs`` under its version (``PostgresSaver``, whose
checkpoint is ``jsonb``). Values are decoded by :mod:`~store.importing.readers._serde`
(never unpickled: a pickled value refuses the thread, and so the source unless
``skip_invalid``), and each LangChain message is mapped as the ``langchain`` format maps
it (:func:`~store.formats.from_langchain`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError, from_langchain
from store.importing.readers._compaction import kept_aside
from store.importing.readers._database import Database, open_database
from store.importing.readers._serde import decode, is_message
from store.importing.readers._sqlite import name
from store.importing.readers.openai_agents import timestamp
from store.importing.source import (
    Conversation,
    Located,
    Location,
    parse_json,
    reading,
)

__all__ = [
    "BLOBS_TABLE",
    "CHECKPOINTS_TABLE",
    "DEFAULT_CHANNEL",
    "DROPPED",
    "is_checkpoints_table",
    "read",
]

CHECKPOINTS_TABLE = "checkpoints"
BLOBS_TABLE = "checkpoint_blobs"
DEFAULT_CHANNEL = "messages"
DROPPED = "dropped from the thread's messages by a later LangGraph checkpoint"
"""Why a message the newest checkpoint no longer holds is excluded."""
_CHECKPOINT_COLUMNS = frozenset(
    {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint"}
)
_BLOB_COLUMNS = frozenset({"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"})


def is_checkpoints_table(columns: set[str]) -> bool:
    """Whether a table of these columns is a LangGraph checkpoints table."""
    return _CHECKPOINT_COLUMNS <= columns


@dataclass(slots=True)
class _Checkpoint:
    parent: str | None
    moment: datetime | None
    keys: list[str] | None = None
    """The keys of the channel's messages, when the checkpoint holds them itself."""
    version: str | None = None
    """The channel's version, when its value is in the blobs table."""


@dataclass(slots=True)
class _Thread:
    """What the rows of one thread say, as they are read."""

    thread_id: str
    channel: str
    source: str
    checkpoints: dict[str, _Checkpoint] = field(default_factory=dict)
    versions: dict[str, list[str]] = field(default_factory=dict)
    messages: dict[str, tuple[str, Any, str]] = field(default_factory=dict)
    """A message's key to its newest (rank, value, where)."""
    failure: InvalidSource | None = None
    """Why the thread cannot be read."""

    def keys(self, value: Any, rank: str, where: str) -> list[str]:
        """The keys of a channel value's messages, each kept by its newest version (no
        value: none)."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidSource(
                self.source, where, f"channel {self.channel} is not a list of messages"
            )
        found: list[str] = []
        for position, item in enumerate(value, start=1):
            place = f"{where} message {position}"
            if not is_message(item):
                raise InvalidSource(
                    self.source,
                    place,
                    f"an item of channel {self.channel} that is not a LangChain message",
                )
            ident = item["data"].get("id")
            key = ident if isinstance(ident, str) and ident else json.dumps(item, sort_keys=True)
            held = self.messages.get(key)
            if held is None or held[0] <= rank:
                self.messages[key] = (rank, item, place)
            found.append(key)
        return found


def _checkpoint(thread: _Thread, source: str, row: tuple[Any, ...]) -> None:
    _, checkpoint_id, parent, kind, data = row
    where = f"thread {thread.thread_id} checkpoint {checkpoint_id}"
    if isinstance(data, str):  # PostgresSaver's jsonb
        try:
            value = parse_json(data, source, where)
        except json.JSONDecodeError:
            raise InvalidSource(source, where, "checkpoint is not JSON") from None
    else:
        value = decode(kind, data, source, where)
    if not isinstance(value, dict):
        raise InvalidSource(source, where, "checkpoint is not an object")
    entry = _Checkpoint(parent if isinstance(parent, str) else None, timestamp(value.get("ts")))
    values = value.get("channel_values")
    versions = value.get("channel_versions")
    if isinstance(values, dict) and thread.channel in values:
        entry.keys = thread.keys(values[thread.channel], str(checkpoint_id), where)
    elif isinstance(versions, dict) and thread.channel in versions:
        entry.version = str(versions[thread.channel])
    thread.checkpoints[str(checkpoint_id)] = entry


def _blob(thread: _Thread, source: str, row: tuple[Any, ...]) -> None:
    _, version, kind, data = row
    where = f"thread {thread.thread_id} channel {thread.channel} version {version}"
    value = decode(kind, data, source, where)
    thread.versions[str(version)] = thread.keys(value, str(version), where)


def _chain(thread: _Thread) -> tuple[list[tuple[str, _Checkpoint]], int]:
    """The newest checkpoint's chain, oldest first, and how many checkpoints are off it."""
    chain: list[tuple[str, _Checkpoint]] = []
    current: str | None = max(thread.checkpoints)
    seen: set[str] = set()
    while current is not None and current in thread.checkpoints and current not in seen:
        seen.add(current)
        chain.append((current, thread.checkpoints[current]))
        current = thread.checkpoints[current].parent
    chain.reverse()
    return chain, len(thread.checkpoints) - len(chain)


def _keys_of(thread: _Thread, checkpoint_id: str, entry: _Checkpoint) -> list[str] | None:
    if entry.keys is not None:
        return entry.keys
    if entry.version is None:
        return None
    if entry.version not in thread.versions:
        raise InvalidSource(
            thread.source,
            f"thread {thread.thread_id} checkpoint {checkpoint_id}",
            f"version {entry.version} of channel {thread.channel} is not in {BLOBS_TABLE}",
        )
    return thread.versions[entry.version]


def _place(order: list[str], placed: set[str], keys: list[str]) -> None:
    """Put the keys not placed yet into ``order``: after the key before them in
    ``keys``, else before the key after them, else last."""
    for index, key in enumerate(keys):
        if key in placed:
            continue
        before = next((k for k in reversed(keys[:index]) if k in placed), None)
        after = next((k for k in keys[index + 1 :] if k in placed), None)
        if before is not None:
            order.insert(order.index(before) + 1, key)
        elif after is not None:
            order.insert(order.index(after), key)
        else:
            order.append(key)
        placed.add(key)


def _conversation(thread: _Thread, source: str) -> Conversation | None:
    """The thread's session; None when no checkpoint of its chain holds the channel."""
    chain, off = _chain(thread)
    order: list[str] = []
    placed: set[str] = set()
    first_seen: dict[str, datetime | None] = {}
    newest: list[str] | None = None
    for checkpoint_id, entry in chain:
        keys = _keys_of(thread, checkpoint_id, entry)
        if keys is None:
            continue
        for key in keys:
            first_seen.setdefault(key, entry.moment)
        _place(order, placed, keys)
        newest = keys
    if newest is None:
        return None
    kept = set(newest)
    conversation = Conversation(source, f"thread {thread.thread_id}", thread.thread_id)
    for key in order:
        _, item, where = thread.messages[key]
        try:
            (message,) = from_langchain([item], allow_custom_roles=reading().allow_custom_roles)
        except FormatError as error:
            raise InvalidSource(source, where, error.problem) from None
        if message.created_at is None and first_seen[key] is not None:
            message = message.model_copy(update={"created_at": first_seen[key]})
        if key not in kept:
            message = kept_aside(message, DROPPED)
            conversation.compacted = True
        conversation.messages.append(Located(message, where))
    if off:
        conversation.notes.append(
            f"thread {thread.thread_id}: {off} checkpoint{'s' if off != 1 else ''} off the "
            "newest checkpoint's chain (other branches) not read"
        )
    return conversation


def _tables(database: Database, source: str, table: str | None) -> tuple[str, str | None]:
    checkpoints = database.plain_table(name(table or CHECKPOINTS_TABLE, source))
    if not is_checkpoints_table(database.columns(checkpoints)):
        raise InvalidSource(source, None, f"not a LangGraph checkpoint database ({checkpoints})")
    if BLOBS_TABLE not in database.tables():
        return checkpoints, None
    blobs = database.plain_table(BLOBS_TABLE)
    return checkpoints, blobs if _BLOB_COLUMNS <= database.columns(blobs) else None


def _channel(source: str) -> str:
    channel = reading().channel or DEFAULT_CHANNEL
    try:
        return name(channel, source)
    except InvalidSource:
        raise InvalidSource(source, None, f"invalid channel name {channel!r}") from None


def _threads(database: Database, source: str, table: str | None, channel: str) -> Iterator[_Thread]:
    checkpoints, blobs = _tables(database, source, table)
    order = database.text_order("thread_id")
    with ExitStack() as stack:
        rows = stack.enter_context(
            closing(
                database.rows(
                    "SELECT thread_id, checkpoint_id, parent_checkpoint_id, type, checkpoint "
                    f"FROM {checkpoints} WHERE checkpoint_ns = '' ORDER BY {order}"
                )
            )
        )
        values: Iterator[tuple[Any, ...]] = iter(())  # no blobs table: every value inline
        if blobs is not None:
            values = stack.enter_context(
                closing(
                    database.rows(
                        f"SELECT thread_id, version, type, blob FROM {blobs} "
                        f"WHERE checkpoint_ns = '' AND channel = '{channel}' ORDER BY {order}"
                    )
                )
            )
        yield from _merged(source, channel, rows, values)


def _merged(
    source: str,
    channel: str,
    rows: Iterator[tuple[Any, ...]],
    values: Iterator[tuple[Any, ...]],
) -> Iterator[_Thread]:
    """The threads of the checkpoint rows, each with the blob rows of its thread (both
    ordered by thread id, as Python orders text)."""
    pending = next(values, None)
    for thread_id, found in groupby(rows, key=lambda row: str(row[0])):
        thread = _Thread(thread_id, channel, source)
        held: list[tuple[Any, ...]] = []
        while pending is not None and str(pending[0]) <= thread_id:
            if str(pending[0]) == thread_id:
                held.append(pending)
            pending = next(values, None)
        try:
            _fill(thread, source, found, held)
        except InvalidSource as error:
            thread.failure = error
        yield thread


def _fill(
    thread: _Thread, source: str, found: Iterable[tuple[Any, ...]], held: list[tuple[Any, ...]]
) -> None:
    for row in found:
        _checkpoint(thread, source, row)
    for row in held:
        _blob(thread, source, row)


def read(location: Location, source: str, table: str | None = None) -> Iterator[Conversation]:
    """The database's threads (``table`` names the checkpoints table, ``checkpoints``
    unless given), one session each; a damaged thread is a conversation with its
    error, so that ``skip_invalid`` skips that thread only."""
    database = open_database(location, source)
    channel = _channel(source)
    for thread in _threads(database, source, table, channel):
        where = f"thread {thread.thread_id}"
        try:
            if thread.failure is not None:
                raise thread.failure
            conversation = _conversation(thread, source)
        except InvalidSource as error:
            yield Conversation(source, where, thread.thread_id, error=error)
            continue
        if conversation is not None:
            yield conversation
