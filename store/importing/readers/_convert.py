"""Running a converter on one record, its errors placed in the source."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError
from store.importing.source import Conversation, Located, format_failure
from strategies.messages import Message

__all__ = ["conversation", "own_id"]


def own_id(value: Any) -> str | None:
    """A source's own session id: a non-empty string (or an integer), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value else None


def conversation(
    source: str,
    where: str,
    session: str | None,
    items: Any,
    convert: Callable[[Sequence[Any]], list[Message]],
    places: Sequence[str] | None = None,
) -> Conversation:
    """Convert ``items`` (a list) at ``where`` into one conversation; ``places`` says
    where each item is (by default ``<where> message <n>``)."""
    if not isinstance(items, list):
        raise InvalidSource(source, where, "expected a list of messages")
    try:
        messages = convert(items)
    except FormatError as error:
        if places is not None and 0 <= error.index < len(places):
            raise InvalidSource(source, places[error.index], error.problem) from None
        raise format_failure(source, where, error) from None
    if places is not None and len(places) == len(messages):
        located = [Located(m, place) for m, place in zip(messages, places, strict=True)]
    else:
        located = [Located(m, f"{where} message {i + 1}") for i, m in enumerate(messages)]
    return Conversation(source, where, session, located)
