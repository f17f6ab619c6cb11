"""``vercel-ai``: Vercel AI SDK ``UIMessage[]`` JSON, one file a chat, or a folder.

A file holds the UI messages of one chat (its session id the file's name without its
extension), or ``{"id": ..., "messages": [...]}`` (its session id the ``id``), or a list
or JSONL of such documents (an export; see :mod:`store.importing.readers._chats`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.formats import from_vercel_ai
from store.importing.readers._chats import read_chats
from store.importing.source import Conversation

__all__ = ["read"]


def _no_own_id(items: list[Any]) -> str | None:
    return None  # UI messages carry the chat's id only beside them


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The chats of a file or a folder of files."""
    return read_chats("vercel-ai", from_vercel_ai, _no_own_id, path, source)
