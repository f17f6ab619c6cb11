"""``adk``: Google ADK's session stores (``DatabaseSessionService`` on SQLite, and
``SqliteSessionService``; a SQLite file or a PostgreSQL URL), read-only.

Every row of ``events`` in the order ADK reads them back (``timestamp``, then ``id``),
one session each (``app_name``, ``user_id``, ``session_id``); the session id is the
three joined with ``/`` (``weather_app/alice/s1``; a ``/`` or ``%`` inside one of
them is written ``%2F`` or ``%25``). Two layouts of the events table are read:

- schema v1 (``DatabaseSessionService`` after ADK 1.21, on a new database;
  ``SqliteSessionService``): the whole event as JSON in ``event_data``;
- schema v0 (ADK 1.19 to 1.21, and the databases later releases keep writing in it):
  one column a field, the content as JSON in ``content`` (the pickled ``actions``
  are never read).

An event becomes one message, with the event's id as its message id and its time
(``timestamp``: the event's own epoch in v1, else the column) as ``created_at``. Its
content's parts become contents: ``text`` (``thought`` text as reasoning),
``function_call`` (``id``, ``name``, ``args``), ``function_response`` (``id``,
``response``), ``inline_data`` as data, ``file_data`` as a URI, any other part kept
whole as ``other``. An event holding a function response is a ``tool`` message;
otherwise the content's role says: ``model`` is ``assistant``, ``user`` is ``user``.
The author is the ``author_name`` (except ``user``); ``invocation_id`` and ``branch``
are kept in the metadata. An event without content (a state change, a transfer) holds
no message and is not imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from store.errors import InvalidSource
from store.formats import SOURCE_FORMAT_KEY
from store.formats._common import describe_validation, shown
from store.importing.readers._database import Database, open_database
from store.importing.readers._sessions import RUN
from store.importing.readers._sqlite import name
from store.importing.source import Conversation, Located, Location, parse_json
from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

__all__ = ["EVENTS_TABLE", "SESSIONS_TABLE", "is_events_table", "read", "session_key"]

EVENTS_TABLE = "events"
SESSIONS_TABLE = "sessions"
_KEY_COLUMNS = frozenset({"id", "app_name", "user_id", "session_id", "timestamp"})
_V0_COLUMNS = frozenset({"author", "content"})
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_ROLES = {"model": "assistant", "user": "user"}


def is_events_table(found: set[str]) -> bool:
    """Whether a table of these columns is an ADK events table (v1 or v0)."""
    return _KEY_COLUMNS <= found and ("event_data" in found or _V0_COLUMNS <= found)


def session_key(app_name: Any, user_id: Any, session_id: Any) -> str:
    """The session id of an ADK session: app name, user id and id, joined with ``/``."""
    parts = (
        str(part).replace("%", "%25").replace("/", "%2F")
        for part in (app_name, user_id, session_id)
    )
    return "/".join(parts)


def _snake(value: Any) -> Any:
    """A part with its keys in snake case (ADK writes them so; ``by_alias`` JSON and
    older releases in camel case)."""
    if not isinstance(value, dict):
        return value
    return {_CAMEL.sub(r"_\1", key).lower(): item for key, item in value.items()}


def _moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):  # a PostgreSQL timestamp column
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    return None


def _rest(part: dict[str, Any], *taken: str) -> dict[str, Any]:
    return {key: item for key, item in part.items() if key not in taken}


def _call(where: str, source: str, part: dict[str, Any]) -> FunctionCallContent:
    call = _snake(part["function_call"])
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise InvalidSource(source, where, "a function_call without a name")
    if not isinstance(call.get("id"), str) or not call["id"]:
        raise InvalidSource(source, where, f"function_call {call['name']!r} has no id")
    args = call.get("args")
    if args is not None and not isinstance(args, dict):
        raise InvalidSource(source, where, f"function_call {call['name']!r}: args is not an object")
    extra = _rest(part, "function_call") | {
        f"function_call.{key}": item for key, item in _rest(call, "id", "name", "args").items()
    }
    return FunctionCallContent(
        call_id=call["id"],
        name=call["name"],
        arguments=args if args is not None else {},
        extra=extra,
    )


def _result(where: str, source: str, part: dict[str, Any]) -> FunctionResultContent:
    response = _snake(part["function_response"])
    if not isinstance(response, dict):
        raise InvalidSource(source, where, "a function_response that is not an object")
    if not isinstance(response.get("id"), str) or not response["id"]:
        raise InvalidSource(source, where, f"function_response {response.get('name')!r} has no id")
    extra = _rest(part, "function_response") | {
        f"function_response.{key}": item for key, item in _rest(response, "id", "response").items()
    }
    return FunctionResultContent(
        call_id=response["id"], result=response.get("response"), extra=extra
    )


def _content(where: str, source: str, raw: Any) -> Content:
    part = _snake(raw)
    if not isinstance(part, dict):
        raise InvalidSource(source, where, "a content part that is not an object")
    if part.get("function_call") is not None:
        return _call(where, source, part)
    if part.get("function_response") is not None:
        return _result(where, source, part)
    if isinstance(part.get("text"), str):
        if part.get("thought") is True:
            return ReasoningContent(text=part["text"], extra=_rest(part, "text", "thought"))
        return TextContent(text=part["text"], extra=_rest(part, "text"))
    data = _snake(part.get("inline_data"))
    if isinstance(data, dict) and isinstance(data.get("data"), str):
        extra = _rest(part, "inline_data") | {
            f"inline_data.{k}": v for k, v in _rest(data, "data", "mime_type").items()
        }
        return DataContent(data=data["data"], media_type=data.get("mime_type"), extra=extra)
    file = _snake(part.get("file_data"))
    if isinstance(file, dict) and isinstance(file.get("file_uri"), str):
        extra = _rest(part, "file_data") | {
            f"file_data.{k}": v for k, v in _rest(file, "file_uri", "mime_type").items()
        }
        return UriContent(uri=file["file_uri"], media_type=file.get("mime_type"), extra=extra)
    kind = next((key for key, item in part.items() if item is not None), "part")
    return OtherContent(kind=kind, payload=part)


def _role(
    where: str, source: str, content: dict[str, Any], author: Any, contents: list[Content]
) -> str:
    if any(isinstance(c, FunctionResultContent) for c in contents):
        return "tool"
    role = content.get("role")
    if role is None:
        return "user" if author == "user" else "assistant"
    if not isinstance(role, str) or role not in _ROLES:
        raise InvalidSource(
            source, where, f"unknown content role {shown(role)} (expected model or user)"
        )
    return _ROLES[role]


def _message(where: str, source: str, event: dict[str, Any]) -> Message | None:
    """The message of one event (as ``{"id", "author", "content", "timestamp", ...}``);
    None when it has no content."""
    content = event.get("content")
    if content is None:
        return None
    if not isinstance(content, dict):
        raise InvalidSource(source, where, "content is not an object")
    parts = content.get("parts")
    if not parts:
        return None
    if not isinstance(parts, list):
        raise InvalidSource(source, where, "content.parts is not a list")
    author = event.get("author")
    metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: "adk"}
    for key in ("invocation_id", "branch"):
        if isinstance(event.get(key), str) and event[key]:
            metadata[f"adk_{key}"] = event[key]
    try:
        contents = [_content(where, source, part) for part in parts]
        return Message(
            role=_role(where, source, content, author, contents),
            contents=contents,
            message_id=str(event["id"]),
            author_name=author if isinstance(author, str) and author and author != "user" else None,
            created_at=_moment(event.get("timestamp")),
            metadata=metadata,
        )
    except ValidationError as error:
        raise InvalidSource(source, where, describe_validation(error)) from None


def _json(where: str, source: str, column: str, value: Any) -> Any:
    if value is None:
        return None
    try:
        return parse_json(value, source, where)
    except (TypeError, json.JSONDecodeError):
        raise InvalidSource(source, where, f"{column} is not JSON") from None


def _event(source: str, row: tuple[Any, ...], v1: bool) -> tuple[str, dict[str, Any]]:
    """Where the row is, and its event: ``(rowid, app, user, session, id, timestamp,
    event_data or author, content, invocation_id, branch)``."""
    rowid, _, _, _, event_id, stamp, *rest = row
    where = f"event {event_id}" if rowid is None else f"row {rowid} (event {event_id})"
    if v1:
        event = _json(where, source, "event_data", rest[0]) if rest[0] is not None else {}
        if not isinstance(event, dict):  # a NULL event_data is an empty event, as ADK reads it
            raise InvalidSource(source, where, "event_data is not a JSON object")
        event = {**event, "id": event_id}
        event.setdefault("timestamp", stamp)
        if _moment(event["timestamp"]) is None:
            event["timestamp"] = stamp
        return where, event
    author, content, invocation, branch = rest
    return where, {
        "id": event_id,
        "author": author,
        "content": _json(where, source, "content", content),
        "timestamp": stamp,
        "invocation_id": invocation,
        "branch": branch,
    }


def _query(database: Database, source: str, table: str) -> tuple[str, bool]:
    if table not in database.tables():
        raise InvalidSource(source, None, f"not a Google ADK session store (no {table} table)")
    found = database.columns(database.plain_table(table))
    if not is_events_table(found):
        raise InvalidSource(source, None, f"not a Google ADK session store ({table} columns)")
    v1 = "event_data" in found
    fields = (
        "event_data, NULL, NULL, NULL"
        if v1
        else f"author, content, invocation_id, {'branch' if 'branch' in found else 'NULL'}"
    )
    query = (
        f"SELECT {database.row_id}, app_name, user_id, session_id, id, timestamp, {fields} "
        f"FROM {table} ORDER BY app_name, user_id, session_id, timestamp, id"
    )
    return query, v1


def read(location: Location, source: str, table: str | None = None) -> Iterator[Conversation]:
    """The database's sessions (a SQLite file or a PostgreSQL database; ``table``
    names the events table, ``events`` unless given); a session without any message
    is left out."""
    database = open_database(location, source)
    query, v1 = _query(database, source, name(table or EVENTS_TABLE, source))
    run: Conversation | None = None
    for row in database.rows(query):
        key = session_key(row[1], row[2], row[3])
        if run is None or run.source_session != key or len(run.messages) >= RUN:
            if run is not None and run.messages:
                yield run
            run = Conversation(source, f"session {key}", key)
        where, event = _event(source, row, v1)
        message = _message(where, source, event)
        if message is not None:
            run.messages.append(Located(message, where))
    if run is not None and run.messages:
        yield run
