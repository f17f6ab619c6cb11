"""``open-webui``: Open WebUI's chats, from its database (``webui.db``) or from the JSON
its "Export chats" writes.

A chat record is ``{"id", "title", "chat": {...}, ...}``: a row of the database's
``chat`` table (``chat`` JSON text there), or an element of the export's list (a single
chat's export is a list of one; a lone record, or a chat's bare body, is read too). The
body's ``history.messages`` is a tree: messages by id, each naming its ``parentId`` and
its ``childrenIds``; ``history.currentId`` is the leaf the user last saw. Its current
path is the session (its id the chat's ``id``, its title the chat's ``title``); every
other branch (a regenerated answer, an edited question) is a fork of the path it leaves,
at the last message they share, with the id ``<session>~<first message of its own>``
(:mod:`store.importing.readers._forks`); a branch from another root (an edit of the first
question) is a root session, linked to its sibling by its first message's
:data:`~store.formats.open_webui.OPEN_WEBUI_BRANCH_KEY`. A body of the oldest releases,
with a ``messages`` list and no ``history``, is one path. A chat without messages is
skipped. The messages are those :func:`~store.formats.open_webui.from_open_webui` makes.

The tree is read from ``parentId`` (``childrenIds`` only orders siblings, newest last,
and a child it names that is missing is a stale link, which Open WebUI itself skips); a
``parentId`` that names no message of the chat refuses the chat. The database is read
row by row over :func:`chat_sessions`, which takes any source of rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError
from store.formats._common import shown
from store.formats.open_webui import OPEN_WEBUI_BRANCH_KEY, from_open_webui
from store.importing.readers._convert import own_id
from store.importing.readers._database import open_database
from store.importing.readers._exports import conversations, is_export_source
from store.importing.readers._forks import Link, plan
from store.importing.readers._sqlite import is_sqlite, name
from store.importing.readers._tree import Branch, TreeError, branches
from store.importing.source import (
    Conversation,
    ForkOrigin,
    Located,
    Location,
    load_document,
    parse_json,
    reading,
)

__all__ = ["CHAT_TABLE", "chat_sessions", "is_chat_table", "read"]

CHAT_TABLE = "chat"
"""Open WebUI's table of chats, one row a chat."""
_COLUMNS = ("id", "title", "chat")
"""The columns of :data:`CHAT_TABLE` that are read."""


def is_chat_table(names: set[str]) -> bool:
    """Whether a table with the columns ``names`` is Open WebUI's ``chat`` table."""
    return {"id", "user_id", "title", "chat"} <= names


def _body(record: Mapping[str, Any]) -> Mapping[str, Any]:
    chat = record.get("chat")
    return chat if isinstance(chat, Mapping) else record


def _history(source: str, where: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """The chat's messages by id and its current message id."""
    history = body.get("history")
    if isinstance(history, Mapping) and isinstance(history.get("messages"), dict):
        return history["messages"], history.get("currentId")
    legacy = body.get("messages")
    if history is None and isinstance(legacy, list):
        return _chain(source, where, legacy), None
    raise InvalidSource(source, where, "expected an Open WebUI chat (no history.messages)")


def _chain(source: str, where: str, listed: list[Any]) -> dict[str, Any]:
    """The oldest releases' ``messages`` list as a history: each message the child of the
    one before it."""
    found: dict[str, Any] = {}
    previous: str | None = None
    for number, message in enumerate(listed, start=1):
        if not isinstance(message, dict) or not own_id(message.get("id")):
            raise InvalidSource(source, f"{where} message {number}", "a message needs an id")
        message_id = str(message["id"])
        found[message_id] = {"parentId": previous, **message}
        previous = message_id
    return found


def _tree(source: str, where: str, messages: dict[str, Any], current: Any) -> list[Branch]:
    parents: dict[str, str | None] = {}
    for message_id, message in messages.items():
        place = f"{where} message {message_id}"
        if not isinstance(message, dict):
            raise InvalidSource(source, place, "a history message must be an object")
        if message.get("id", message_id) != message_id:
            raise InvalidSource(
                source, place, f"its id {shown(message.get('id'))} is not its key {message_id!r}"
            )
        parent = message.get("parentId")
        if parent is not None and (not isinstance(parent, str) or parent not in messages):
            raise InvalidSource(source, place, f"parentId {shown(parent)} names no message")
        parents[message_id] = parent
    children = _children(messages, parents)
    try:
        return branches(parents, children, current if isinstance(current, str) else None)
    except TreeError as error:
        raise InvalidSource(source, where, str(error)) from None


def _children(messages: dict[str, Any], parents: dict[str, str | None]) -> dict[str, list[str]]:
    """Each message's children, in the order its ``childrenIds`` lists them (newest
    last), those it does not list after them."""
    children: dict[str, list[str]] = {message_id: [] for message_id in messages}
    for message_id, parent in parents.items():
        if parent is not None:
            children[parent].append(message_id)
    for parent, found in children.items():
        listed = messages[parent].get("childrenIds")
        order = {c: i for i, c in enumerate(listed)} if isinstance(listed, list) else {}
        found.sort(key=lambda child: order.get(child, len(order)))
    return children


class _Converted:
    """Each history message's messages, converted once however many branches show it,
    the first carrying its branch link."""

    def __init__(self, source: str, where: str, messages: dict[str, Any], links: dict[str, Link]):
        self.source = source
        self.where = where
        self.messages = messages
        self.links = links
        self.done: dict[str, list[Located]] = {}

    def __call__(self, node: str) -> list[Located]:
        if node not in self.done:
            self.done[node] = self._convert(node)
        return self.done[node]

    def _convert(self, node: str) -> list[Located]:
        place = f"{self.where} message {node}"
        item = {**self.messages[node], "id": node}
        try:
            made = from_open_webui([item], allow_custom_roles=reading().allow_custom_roles)
        except FormatError as error:
            raise InvalidSource(self.source, place, error.problem) from None
        if node in self.links:
            metadata = {**made[0].metadata, OPEN_WEBUI_BRANCH_KEY: self.links[node]}
            made[0] = made[0].model_copy(update={"metadata": metadata})
        return [Located(message, place) for message in made]


def _sessions(source: str, where: str, record: Any) -> Iterator[Conversation]:
    if not isinstance(record, Mapping):
        raise InvalidSource(source, where, "expected an Open WebUI chat (an object)")
    body = _body(record)
    session = own_id(record.get("id")) or own_id(body.get("id"))
    title = record.get("title") if isinstance(record.get("title"), str) else body.get("title")
    title = title if isinstance(title, str) and title else None
    messages, current = _history(source, where, body)
    if not messages:
        return  # a chat without a message
    planned, links = plan(session, _tree(source, where, messages, current), lambda _: True)
    converted = _Converted(source, where, messages, links)
    for each in planned:
        located = [found for node in each.nodes for found in converted(node)]
        if each.branch.parent is None:
            yield Conversation(source, where, each.session_id, located, title=title)
            continue
        origin = None
        if each.parent is not None and each.at is not None:
            origin = ForkOrigin(each.parent, converted(each.at)[-1].message.message_id)
        yield Conversation(
            source,
            f"{where} branch {each.branch.first}",
            each.session_id,
            located,
            title=title,
            origin=origin,
        )


def _guarded(source: str, where: str, record: Any) -> Iterator[Conversation]:
    """A chat's sessions, or, when any of them does not read, the chat's error."""
    try:
        found = list(_sessions(source, where, record))  # every branch converts, or none
    except InvalidSource as error:
        own = own_id(record.get("id")) if isinstance(record, Mapping) else None
        yield Conversation(source, where, own, error=error)
        return
    yield from found


def chat_sessions(source: str, found: Iterable[Mapping[str, Any]]) -> Iterator[Conversation]:
    """The sessions of rows of a ``chat`` table (``id``, ``title``, ``chat``: the body as
    JSON text, or already decoded), in the order given."""
    for row in found:
        where = f"chat {row['id']}"
        body = row["chat"]
        if isinstance(body, str | bytes):
            try:
                body = parse_json(body, source, where)
            except json.JSONDecodeError:
                failure = InvalidSource(source, where, "the chat column is not JSON")
                yield Conversation(source, where, own_id(row["id"]), error=failure)
                continue
            except InvalidSource as error:
                yield Conversation(source, where, own_id(row["id"]), error=error)
                continue
        yield from _guarded(source, where, {"id": row["id"], "title": row["title"], "chat": body})


def _database(location: Location, source: str, table: str | None) -> Iterator[Conversation]:
    database = open_database(location, source)
    checked = database.plain_table(name(table or CHAT_TABLE, source))
    present = database.columns(checked)
    missing = [column for column in _COLUMNS if column not in present]
    if missing:
        raise InvalidSource(
            source, None, f"{checked} has no {', '.join(missing)} column: not Open WebUI's chats"
        )
    order = "created_at, id" if "created_at" in present else "id"
    query = f"SELECT id, title, chat FROM {checked} ORDER BY {order}"
    found = ({"id": r[0], "title": r[1], "chat": r[2]} for r in database.rows(query))
    yield from chat_sessions(source, found)


def _export(path: Path, source: str) -> Iterator[Conversation]:
    if path.is_dir():
        raise InvalidSource(
            source, None, "a folder: give Open WebUI's webui.db or its chat export's file"
        )
    if is_export_source(path):  # a list of chats: streamed one at a time
        for number, record in conversations(path, source):
            yield from _guarded(source, f"conversation {number}", record)
        return
    yield from _guarded(source, "conversation 1", load_document(path, source))


def read(location: Location, source: str, table: str | None = None) -> Iterator[Conversation]:
    """The sessions of a database's chats (a SQLite file's or a PostgreSQL database's),
    or of an export's."""
    if isinstance(location, Path) and not is_sqlite(location):
        yield from _export(location, source)
    else:
        yield from _database(location, source, table)
