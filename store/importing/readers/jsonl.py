"""``jsonl``: chatledger's own lossless format, one message a line.

Each line is ``{"format": "chatledger", "version": 1, "session_id": ..., "seq": ...,
"message": {...}, "source_system": ..., "source_id": ...}``: the stored message model
(:data:`strategies.messages.MESSAGES_ADAPTER`'s form) with its session, its ``seq``
and its provenance. Lines of one session are consecutive; they are streamed.

The first line of a fork's session also says where it was forked from:
``"fork": {"parent_session_id": ..., "fork_message_id": ...}`` (:data:`FORK_KEY`), so
that the importer can make it a fork of its parent again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from store.errors import InvalidSource
from store.formats._common import shown
from store.importing.readers._convert import own_id
from store.importing.source import Conversation, ForkOrigin, Located, iter_lines, parse_line
from store.rules.storage_json import message_value
from strategies.messages import Message

__all__ = ["FORK_KEY", "FORMAT_NAME", "FORMAT_VERSION", "line_of", "read"]

FORMAT_NAME = "chatledger"
"""The ``format`` of every line."""
FORMAT_VERSION = 1
"""The ``version`` of every line this release writes and reads."""
FORK_KEY = "fork"
"""The key of a fork's origin, on the first line of its session."""

RUN = 1000
"""Lines of one session converted and handed on at a time."""


def line_of(
    session_id: str,
    seq: int,
    message: Message,
    source_system: str | None,
    source_id: str | None,
    *,
    fork: ForkOrigin | None = None,
) -> dict[str, Any]:
    """One line of the format (before ``json.dumps``); ``fork`` on a fork's first line."""
    line: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "session_id": session_id,
        "seq": seq,
        "message": message_value(message),
        "source_system": source_system,
        "source_id": source_id,
    }
    if fork is not None:
        line[FORK_KEY] = {
            "parent_session_id": fork.parent_session_id,
            "fork_message_id": fork.fork_message_id,
        }
    return line


def _origin(source: str, where: str, value: dict[str, Any]) -> ForkOrigin | None:
    if FORK_KEY not in value or value[FORK_KEY] is None:
        return None
    given = value[FORK_KEY]
    parent = own_id(given.get("parent_session_id")) if isinstance(given, dict) else None
    at = given.get("fork_message_id") if isinstance(given, dict) else None
    if parent is None or not (at is None or (isinstance(at, str) and at)):
        raise InvalidSource(
            source,
            where,
            f"{FORK_KEY} must be an object with a non-empty parent_session_id and a "
            "fork_message_id (a non-empty string or null)",
        )
    return ForkOrigin(parent, at)


def _message(source: str, where: str, value: Any) -> tuple[str, Message]:
    if not isinstance(value, dict) or value.get("format") != FORMAT_NAME:
        raise InvalidSource(source, where, "not a chatledger JSONL line")
    if value.get("version") != FORMAT_VERSION:
        raise InvalidSource(source, where, f"unsupported version {shown(value.get('version'))}")
    session = own_id(value.get("session_id"))
    if session is None:
        raise InvalidSource(source, where, "session_id must be a non-empty string")
    try:
        message = Message.model_validate(value.get("message"), context={"allow_custom_roles": True})
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        location = ".".join(str(p) for p in first["loc"])
        raise InvalidSource(source, where, f"message.{location}: {first['msg']}") from None
    return session, message


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The file's sessions, in runs of consecutive lines; the first run of a fork's
    session carries its origin (a later line of the session may repeat it, not change
    it)."""
    run: Conversation | None = None
    origin: ForkOrigin | None = None
    for number, line in iter_lines(path, source):
        where = f"line {number}"
        value = parse_line(source, number, line)
        session, message = _message(source, where, value)
        given = _origin(source, where, value)
        starts = run is None or run.source_session != session
        if starts:
            origin = given
        elif given is not None and given != origin:
            raise InvalidSource(
                source, where, f"{FORK_KEY} differs from the one the session's first line gives"
            )
        if starts or run is None or len(run.messages) >= RUN:
            if run is not None:
                yield run
            run = Conversation(source, where, session, stored_ids=True)
            if starts:
                run.origin = origin
        run.messages.append(Located(message, where))
    if run is not None:
        yield run
