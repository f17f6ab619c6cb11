"""``openai-responses``: Responses API input items.

A ``.json`` document is one session (a list of items, or ``{"input": [...]}`` with an
optional ``id``) or a list of such objects. In JSONL, each line is an item and the file
one session, streamed; or each line is ``{"input": [...]}``, one session a line. A
session that carries chatledger's record (an export) gives back the messages it records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError, from_openai_responses
from store.importing.readers._convert import conversation, own_id
from store.importing.readers._exported import recognised
from store.importing.readers._records import records
from store.importing.source import Conversation, Located, reading

__all__ = ["read"]

RUN = 1000
"""Items of a one-session JSONL file converted and handed on at a time."""


def _session(source: str, where: str, value: Any) -> Conversation:
    if isinstance(value, dict) and isinstance(value.get("input"), list):
        session = own_id(value.get("id"))
        return recognised(
            "openai-responses",
            source,
            where,
            session,
            value,
            lambda: conversation(source, where, session, value["input"], from_openai_responses),
        )
    if isinstance(value, list):
        return conversation(source, where, None, value, from_openai_responses)
    raise InvalidSource(source, where, 'expected a list of items or {"input": [...]}')


def _item(source: str, where: str, value: Any) -> Located:
    try:
        (message,) = from_openai_responses([value], allow_custom_roles=reading().allow_custom_roles)
    except FormatError as error:
        raise InvalidSource(source, where, error.problem) from None
    return Located(message, where)


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The file's sessions."""
    run: Conversation | None = None
    for where, value in records(path, source):
        if where == "document":
            if (
                isinstance(value, list)
                and value
                and all(isinstance(v, dict) and "input" in v for v in value)
            ):
                for index, item in enumerate(value):
                    yield _session(source, f"session {index + 1}", item)
            else:
                yield _session(source, where, value)
            return
        if isinstance(value, InvalidSource):
            raise value
        if isinstance(value, dict) and "input" in value:
            yield _session(source, where, value)
            continue
        if run is None:
            run = Conversation(source, "line 1", None)
        run.messages.append(_item(source, where, value))
        if len(run.messages) >= RUN:
            yield run
            run = Conversation(source, "line 1", None)
    if run is not None and run.messages:
        yield run
