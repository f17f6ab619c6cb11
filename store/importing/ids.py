"""The ids the importer gives what its source left without one.

A session's identity on import is (its source system, the source's own session id).
Where the source has no session id, the session is named by what it is, not by where
the file lies: a hash of (format, where the conversation starts in its source, such as
``line 3``, the content of its first message). A message the source gave no id gets
``imp-P-C``: ``P`` a hash of (format, source session, its position in the source
session, counted from 0), ``C`` a hash of its content. So a copied or moved file gives
the same ids, a message changed at a place already stored is told from a new one (its
``P`` is stored with another ``C``), and the same message at another place is another
message.

Releases before this scheme hashed the source file's absolute path into the ids of
sessions without their own, and the line or row into message ids
(:func:`legacy_session_id`, :func:`legacy_message_id`): the importer reads a session
stored under those ids on with them, so importing such a source again from where it was
stores nothing twice.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from store.rules.identity import content_hash
from strategies.messages import Message

__all__ = [
    "IMPORTED_PREFIX",
    "content_key",
    "is_made",
    "legacy_message_id",
    "legacy_session_id",
    "message_id_for",
    "place_of",
    "session_id_for",
]

IMPORTED_PREFIX = "imp-"
"""What every id the importer makes starts with."""

_PLACE = 16
_CONTENT = 16
_MADE_LENGTH = len(IMPORTED_PREFIX) + _PLACE + 1 + _CONTENT


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def content_key(message: Message) -> str:
    """The content hash of ``message`` whatever its id (an id the source did not give is
    random until the importer names it)."""
    return content_hash(message.model_copy(update={"message_id": "-"}))


def session_id_for(fmt: str, where: str, first: Message | None, prefix: str) -> str:
    """The id of a session its source gives none: the prefix and a hash of (format,
    where the conversation starts, its first message's content)."""
    content = "" if first is None else content_key(first)
    return f"{prefix}{IMPORTED_PREFIX}{_digest(fmt, where, content)[:24]}"


def message_id_for(fmt: str, session_key: str, position: int, message: Message) -> str:
    """The id of a message its source gives none: ``imp-`` and a hash of (format, source
    session, position in it), then ``-`` and a hash of its content."""
    place = _digest(fmt, session_key, str(position))[:_PLACE]
    return f"{IMPORTED_PREFIX}{place}-{content_key(message)[:_CONTENT]}"


def is_made(message_id: str) -> bool:
    """Whether ``message_id`` has the shape :func:`message_id_for` gives."""
    return (
        len(message_id) == _MADE_LENGTH
        and message_id.startswith(IMPORTED_PREFIX)
        and message_id[-_CONTENT - 1] == "-"
    )


def place_of(message_id: str) -> str:
    """The place part of an id :func:`message_id_for` made (``imp-P``): two messages of
    one session with the same place and other content are one place given twice."""
    return message_id[: len(IMPORTED_PREFIX) + _PLACE]


def legacy_session_id(fmt: str, source: str, where: str, prefix: str) -> str:
    """The id earlier releases gave a session without its own: a hash of (format, the
    source's absolute path, where the conversation starts)."""
    path = str(Path(source).resolve())
    return f"{prefix}{IMPORTED_PREFIX}{_digest(fmt, path, where)[:24]}"


def legacy_message_id(fmt: str, session_key: str, where: str) -> str:
    """The id earlier releases gave a message without its own: a hash of (format, source
    session, line or row)."""
    return f"{IMPORTED_PREFIX}{_digest(fmt, session_key, where)[:32]}"
