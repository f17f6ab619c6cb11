"""Reading formats that keep one chat a JSON document: a file (or a folder of files)
holding a list of messages, one chat; a ``{"id": ..., "messages": [...]}`` document
(what ``chatledger export`` writes, with chatledger's record beside the messages); or a
list or JSONL of such documents."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.importing.readers._convert import Converter, conversation, named_after_file, own_id
from store.importing.readers._exported import recognised
from store.importing.readers._records import records
from store.importing.source import Conversation

__all__ = ["read_chats"]

SessionOf = Callable[[list[Any]], str | None]
"""The chat's own id found among its messages (None: it has none)."""


def _places(items: Any) -> list[str] | None:
    return [f"message {i + 1}" for i in range(len(items))] if isinstance(items, list) else None


def _chat(
    fmt: str,
    convert: Converter,
    session_of: SessionOf,
    stem: str,
    source: str,
    where: str,
    value: Any,
) -> Conversation:
    if isinstance(value, InvalidSource):
        return Conversation(source, where, None, error=value)
    try:
        if isinstance(value, list):
            own = session_of(value)
            made = conversation(source, where, own or stem, value, convert, _places(value))
            if own is None:
                made.notes.append(named_after_file(where, stem))
            return made
        if not isinstance(value, dict) or "messages" not in value:
            raise InvalidSource(
                source, where, f'expected {fmt} messages or {{"id": ..., "messages": [...]}}'
            )
        items = value["messages"]
        own = own_id(value.get("id")) or (session_of(items) if isinstance(items, list) else None)
        session = own or stem
        prefix = "" if where == "document" else f"{where} "
        places = [f"{prefix}{p}" for p in _places(items) or []] or None
        made = recognised(
            fmt,
            source,
            where,
            session,
            value,
            lambda: conversation(source, where, session, items, convert, places),
        )
        if own is None and made.error is None:
            made.notes.append(named_after_file(where, stem))
        return made
    except InvalidSource as error:
        return Conversation(source, where, None, error=error)


def _is_documents(value: Any) -> bool:
    return bool(value) and all(isinstance(v, dict) and "messages" in v for v in value)


def _file(
    fmt: str, convert: Converter, session_of: SessionOf, path: Path, source: str
) -> Iterator[Conversation]:
    for where, value in records(path, source):
        if where == "document" and isinstance(value, list) and _is_documents(value):
            for index, item in enumerate(value):
                yield _chat(fmt, convert, session_of, path.stem, source, f"chat {index + 1}", item)
        else:
            yield _chat(fmt, convert, session_of, path.stem, source, where, value)


def read_chats(
    fmt: str, convert: Converter, session_of: SessionOf, path: Path, source: str
) -> Iterator[Conversation]:
    """The chats of the file or folder at ``path`` (a folder: each of its ``.json``
    files, one chat a file, in name order). A chat's session id is its own (the
    document's ``id``, else what ``session_of`` finds among its messages), else the
    file's name without its extension."""
    if path.is_dir():
        for file in sorted(path.glob("*.json")):
            yield from _file(fmt, convert, session_of, file, f"{source.rstrip('/')}/{file.name}")
        return
    yield from _file(fmt, convert, session_of, path, source)
