"""Running a converter on one record, its errors placed in the source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from store.errors import InvalidSource
from store.formats import FormatError
from store.importing.source import Conversation, Located, format_failure, reading
from strategies.messages import Message

__all__ = ["Converter", "conversation", "named_after_file", "own_id"]


class Converter(Protocol):
    """A converter of :mod:`store.formats`: items to messages."""

    def __call__(self, items: Sequence[Any], *, allow_custom_roles: bool) -> list[Message]: ...


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
    convert: Converter,
    places: Sequence[str] | None = None,
) -> Conversation:
    """Convert ``items`` (a list) at ``where`` into one conversation; ``places`` says
    where each item is (by default ``<where> message <n>``). Roles outside the standard
    ones are kept when the import's :func:`~store.importing.source.reading` allows them.
    Items that do not convert give the conversation, with its session, and the error."""
    if not isinstance(items, list):
        failure = InvalidSource(source, where, "expected a list of messages")
        return Conversation(source, where, session, error=failure)
    try:
        messages = convert(items, allow_custom_roles=reading().allow_custom_roles)
    except FormatError as error:
        if places is not None and 0 <= error.index < len(places):
            failure = InvalidSource(source, places[error.index], error.problem)
        else:
            failure = format_failure(source, where, error)
        return Conversation(source, where, session, error=failure)
    if places is not None and len(places) == len(messages):
        located = [Located(m, place) for m, place in zip(messages, places, strict=True)]
    else:
        located = [Located(m, f"{where} message {i + 1}") for i, m in enumerate(messages)]
    return Conversation(source, where, session, located)


def named_after_file(where: str, session: str) -> str:
    """The report's note on a session whose source gives it no id of its own: it takes
    its file's name (without the extension), and the import says so."""
    return (
        f"{where}: the source gives no session id; the session is named after its file: {session}"
    )
