"""``openai-agents``: the OpenAI Agents SDK's ``SQLiteSession`` and
``SQLAlchemySession`` stores (a SQLite file or a PostgreSQL URL), read-only.

Every row of ``agent_messages`` (``message_data``: one Responses input item as JSON) in
order of its row id, one session each ``session_id``; ``created_at`` is the message's
timestamp. The table names are the SDK's defaults unless given.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError, from_openai_responses
from store.importing.readers._database import open_database
from store.importing.readers._sessions import by_session
from store.importing.readers._sqlite import name
from store.importing.source import Conversation, Located, Location, parse_json, reading

__all__ = ["MESSAGES_TABLE", "SESSIONS_TABLE", "read", "timestamp"]

MESSAGES_TABLE = "agent_messages"
SESSIONS_TABLE = "agent_sessions"


def timestamp(value: Any) -> datetime | None:
    """A stored timestamp (ISO text, as SQLite keeps it, or a ``datetime``, as PostgreSQL
    gives it), in UTC; None when unreadable."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _located(source: str, where: str, row: tuple[Any, ...]) -> Located:
    try:
        item = parse_json(row[2], source, where)
        (message,) = from_openai_responses([item], allow_custom_roles=reading().allow_custom_roles)
    except (TypeError, json.JSONDecodeError):
        raise InvalidSource(source, where, "message_data is not JSON") from None
    except FormatError as error:
        raise InvalidSource(source, where, error.problem) from None
    created = timestamp(row[3])
    if created is not None and message.created_at is None:
        message = message.model_copy(update={"created_at": created})
    return Located(message, where)


def read(location: Location, source: str, table: str | None = None) -> Iterator[Conversation]:
    """The database's sessions (a SQLite file or a PostgreSQL database)."""
    database = open_database(location, source)
    messages = database.plain_table(name(table or MESSAGES_TABLE, source))
    query = (
        f"SELECT id, session_id, message_data, created_at FROM {messages} ORDER BY session_id, id"
    )
    yield from by_session(
        source, database.rows(query), lambda where, row: _located(source, where, row)
    )
