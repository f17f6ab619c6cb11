"""``agent-framework``: Agent Framework sessions and history files.

``AgentSession.to_dict()`` JSON (one session or a list of them; the messages are those
of every history provider's state, under ``state[...]["messages"]``), and
``FileHistoryProvider`` storage: a folder of JSONL files or one such file, one message
(``Message.to_dict()``) a line, one session a file, whose name is the session id (names
the provider encoded, ``~session-<base32>``, are decoded back). Compaction annotations
become exclusions and summaries (``import_messages``), so a session is read whole. A
session that carries chatledger's record (an export) gives back the messages it records.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import from_agent_framework
from store.formats.documents import state_messages
from store.importing.readers._convert import conversation, own_id
from store.importing.readers._exported import recognised
from store.importing.readers._records import is_document
from store.importing.source import (
    JSON_LINES,
    Conversation,
    iter_lines,
    load_document_or_lines,
    parse_line,
)

__all__ = ["ENCODED_PREFIX", "read", "session_of_file"]

ENCODED_PREFIX = "~session-"
"""How ``FileHistoryProvider`` marks a file name that encodes its session id."""


def session_of_file(path: Path) -> str:
    """The session id a history file's name stands for."""
    stem = path.stem
    if not stem.startswith(ENCODED_PREFIX) or stem.startswith(ENCODED_PREFIX + "-"):
        return stem  # literal, or a digest that cannot be decoded
    encoded = stem.removeprefix(ENCODED_PREFIX).upper()
    try:
        return base64.b32decode(encoded + "=" * (-len(encoded) % 8)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return stem


def _history_file(path: Path, source: str) -> Conversation:
    places: list[str] = []
    items: list[Any] = []
    for number, line in iter_lines(path, source):
        places.append(f"line {number}")
        items.append(parse_line(source, number, line))
    session = session_of_file(path)
    found = conversation(source, "line 1", session, items, from_agent_framework, places)
    found.compacted = True
    return found


def _session(source: str, where: str, value: Any) -> Conversation:
    if not isinstance(value, dict) or value.get("type") != "session":
        raise InvalidSource(source, where, 'expected AgentSession.to_dict() ({"type": "session"})')
    items = state_messages(value.get("state"))
    session = own_id(value.get("session_id"))
    found = recognised(
        "agent-framework",
        source,
        where,
        session,
        value,
        lambda: conversation(source, where, session, items, from_agent_framework),
    )
    found.compacted = True
    return found


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The sessions of a folder, a history file or a ``to_dict()`` document."""
    if path.is_dir():
        for file in sorted(path.glob("*.jsonl")):
            yield _history_file(file, f"{source.rstrip('/')}/{file.name}")
        return
    document = load_document_or_lines(path, source) if is_document(path) else JSON_LINES
    if document is JSON_LINES:
        yield _history_file(path, source)
        return
    if isinstance(document, list):
        for index, value in enumerate(document):
            yield _session(source, f"session {index + 1}", value)
    else:
        yield _session(source, "document", document)
