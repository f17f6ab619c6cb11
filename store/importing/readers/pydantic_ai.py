"""``pydantic-ai``: ``ModelMessagesTypeAdapter`` JSON, one file a session, or a folder.

A file holds the list of requests and responses of one conversation, as
``ModelMessagesTypeAdapter.dump_json`` writes it (its session id the messages' own
``conversation_id``, else the file's name without its extension), or an export's
``{"id": ..., "messages": [...]}`` documents (see :mod:`store.importing.readers._chats`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.formats import from_pydantic_ai
from store.importing.readers._chats import read_chats
from store.importing.readers._convert import own_id
from store.importing.source import Conversation

__all__ = ["read", "session_of"]


def session_of(items: list[Any]) -> str | None:
    """The ``conversation_id`` of the first message that has one."""
    for item in items:
        found = own_id(item.get("conversation_id")) if isinstance(item, dict) else None
        if found is not None:
            return found
    return None


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The conversations of a file or a folder of files."""
    return read_chats("pydantic-ai", from_pydantic_ai, session_of, path, source)
