"""``claude-ai``: Claude.ai's data export, ``conversations.json`` or the export's ``.zip``.

Each conversation is a session: its id the conversation's ``uuid``, its title its
``name``, its messages those :func:`~store.formats.claude_ai.from_claude_ai` makes of its
``chat_messages``, in the order the export lists them (its ``parent_message_uuid`` links
stay in each message's metadata). Conversations are streamed one at a time
(:mod:`store.importing.readers._exports`); a conversation without messages is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError
from store.formats.claude_ai import from_claude_ai
from store.importing.readers._convert import own_id
from store.importing.readers._exports import conversations
from store.importing.source import Conversation, Located, reading

__all__ = ["read"]


def _located(source: str, where: str, items: list[Any]) -> list[Located]:
    custom = reading().allow_custom_roles
    found: list[Located] = []
    for number, item in enumerate(items, start=1):
        place = f"{where} message {number}"
        try:
            converted = from_claude_ai([item], allow_custom_roles=custom)
        except FormatError as error:
            raise InvalidSource(source, place, error.problem) from None
        found.extend(Located(message, place) for message in converted)
    return found


def _session(source: str, number: int, value: Any) -> Conversation | None:
    where = f"conversation {number}"
    if not isinstance(value, dict) or not isinstance(value.get("chat_messages"), list):
        failure = InvalidSource(
            source, where, "expected a Claude.ai conversation (no chat_messages)"
        )
        return Conversation(source, where, None, error=failure)
    items = value["chat_messages"]
    if not items:
        return None
    title = value.get("name") if isinstance(value.get("name"), str) else None
    title = title or None  # an unnamed conversation has no title, not an empty one
    session = own_id(value.get("uuid"))
    try:
        located = _located(source, where, items)
    except InvalidSource as error:
        return Conversation(source, where, session, error=error)
    return Conversation(source, where, session, located, title=title)


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The sessions of an export, one a conversation."""
    for number, value in conversations(path, source):
        found = _session(source, number, value)
        if found is not None:
            yield found
