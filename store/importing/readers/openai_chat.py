"""``openai-chat``: Chat Completions messages.

JSONL with one conversation a line (``{"messages": [...]}``, its id under ``id``,
``session_id`` or ``conversation_id``; or a bare list of messages), or a ``.json``
document: a list of such conversations, one conversation object, or a list of messages
(one conversation). A conversation that carries chatledger's record (an export) gives
back the messages it records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import from_openai_chat
from store.importing.readers._convert import conversation, own_id
from store.importing.readers._exported import recognised
from store.importing.readers._records import records
from store.importing.source import Conversation

__all__ = ["read"]

ID_KEYS = ("id", "session_id", "conversation_id")


def session_of(value: dict[str, Any]) -> str | None:
    """The conversation's own id, under the first of :data:`ID_KEYS` it has."""
    return next((own_id(value[k]) for k in ID_KEYS if k in value), None)


def _one(source: str, where: str, value: Any) -> Conversation:
    if isinstance(value, dict) and "messages" in value:
        session = session_of(value)
        return recognised(
            "openai-chat",
            source,
            where,
            session,
            value,
            lambda: conversation(source, where, session, value["messages"], from_openai_chat),
        )
    if isinstance(value, list):
        return conversation(source, where, None, value, from_openai_chat)
    raise InvalidSource(source, where, 'expected a conversation ({"messages": [...]})')


def _guarded(source: str, where: str, value: Any) -> Conversation:
    if isinstance(value, InvalidSource):
        return Conversation(source, where, None, error=value)
    try:
        return _one(source, where, value)
    except InvalidSource as error:
        return Conversation(source, where, None, error=error)


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The file's conversations."""
    for where, value in records(path, source):
        if where == "document" and isinstance(value, list) and value:
            if all(isinstance(v, dict) and "messages" in v for v in value):
                for index, item in enumerate(value):
                    yield _guarded(source, f"conversation {index + 1}", item)
                continue
        yield _guarded(source, where, value)
