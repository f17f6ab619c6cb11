"""``anthropic``: Messages API request bodies (``messages``, with ``system`` apart).

JSONL with one body a line, or a ``.json`` document holding one body or a list of them.
A body's own id, when it has one, is under ``id``. A body that carries chatledger's
record (an export) gives back the messages it records.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import from_anthropic
from store.importing.readers._convert import conversation, own_id
from store.importing.readers._exported import recognised
from store.importing.readers._records import records
from store.importing.source import Conversation
from strategies.messages import Message

__all__ = ["read"]


def _one(source: str, where: str, body: Any) -> Conversation:
    if not isinstance(body, dict) or "messages" not in body:
        raise InvalidSource(source, where, 'expected a request body ({"messages": [...]})')
    system = body.get("system")

    def convert(items: Sequence[Any], *, allow_custom_roles: bool) -> list[Message]:
        return from_anthropic(items, system=system, allow_custom_roles=allow_custom_roles)

    session = own_id(body.get("id"))
    return recognised(
        "anthropic",
        source,
        where,
        session,
        body,
        lambda: conversation(source, where, session, body["messages"], convert),
    )


def _guarded(source: str, where: str, value: Any) -> Conversation:
    if isinstance(value, InvalidSource):
        return Conversation(source, where, None, error=value)
    try:
        return _one(source, where, value)
    except InvalidSource as error:
        return Conversation(source, where, None, error=error)


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The file's conversations, one a request body."""
    for where, value in records(path, source):
        if where == "document" and isinstance(value, list):
            for index, body in enumerate(value):
                yield _guarded(source, f"body {index + 1}", body)
        else:
            yield _guarded(source, where, value)
