"""``langchain``: LangChain's ``SQLChatMessageHistory`` stores (``message_store``, in a
SQLite file or a PostgreSQL database), read-only, and files of ``message_to_dict`` messages.

In a database, every row (``message``: ``message_to_dict`` JSON) in order of its row
id, one session each ``session_id``; the table name is LangChain's default unless
given. A file is JSONL with one session a line, ``{"session_id": ..., "messages":
[...]}`` (what ``chatledger export --format langchain`` writes: a session that carries
chatledger's record gives back the messages it records), or a ``.json`` list of such
sessions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError, from_langchain
from store.importing.readers._convert import conversation, own_id
from store.importing.readers._database import open_database
from store.importing.readers._exported import recognised
from store.importing.readers._records import records
from store.importing.readers._sessions import by_session
from store.importing.readers._sqlite import is_sqlite, name
from store.importing.source import Conversation, Located, Location, parse_json, reading

__all__ = ["MESSAGES_TABLE", "read"]

MESSAGES_TABLE = "message_store"


def _located(source: str, where: str, row: tuple[Any, ...]) -> Located:
    try:
        (message,) = from_langchain(
            [parse_json(row[2], source, where)], allow_custom_roles=reading().allow_custom_roles
        )
    except (TypeError, json.JSONDecodeError):
        raise InvalidSource(source, where, "message is not JSON") from None
    except FormatError as error:
        raise InvalidSource(source, where, error.problem) from None
    return Located(message, where)


def _session(source: str, where: str, value: Any) -> Conversation:
    if isinstance(value, InvalidSource):
        return Conversation(source, where, None, error=value)
    if not isinstance(value, dict) or "messages" not in value:
        error = InvalidSource(source, where, 'expected {"session_id": ..., "messages": [...]}')
        return Conversation(source, where, None, error=error)
    session = own_id(value.get("session_id"))
    try:
        return recognised(
            "langchain",
            source,
            where,
            session,
            value,
            lambda: conversation(source, where, session, value["messages"], from_langchain),
        )
    except InvalidSource as error:
        return Conversation(source, where, None, error=error)


def _file(path: Path, source: str) -> Iterator[Conversation]:
    for where, value in records(path, source):
        if where == "document" and isinstance(value, list):
            for index, item in enumerate(value):
                yield _session(source, f"session {index + 1}", item)
        else:
            yield _session(source, where, value)


def read(location: Location, source: str, table: str | None = None) -> Iterator[Conversation]:
    """The database's (a SQLite file's or a PostgreSQL database's) or file's sessions."""
    if isinstance(location, Path) and not is_sqlite(location):
        yield from _file(location, source)
        return
    database = open_database(location, source)
    messages = database.plain_table(name(table or MESSAGES_TABLE, source))
    query = f"SELECT id, session_id, message FROM {messages} ORDER BY session_id, id"
    yield from by_session(
        source, database.rows(query), lambda where, row: _located(source, where, row)
    )
