"""Recognising chatledger's own exports: a session document that carries chatledger's
record gives back the stored messages it records, with their ids, so that importing an
export into the store it came from stores nothing new (see
:mod:`store.formats.documents`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from store.errors import InvalidSource
from store.formats.documents import RECORD_KEY, RecordError, restored
from store.importing.source import Conversation, Located

__all__ = ["recognised"]


def recognised(
    fmt: str,
    source: str,
    where: str,
    session: str | None,
    document: dict[str, Any],
    read: Callable[[], Conversation],
) -> Conversation:
    """The conversation of the session ``document`` at ``where``: what ``read`` makes of
    it (the format's own reading), or, when the document carries chatledger's record,
    the messages the record gives back, their ids kept as they are."""
    if RECORD_KEY not in document:
        return read()
    try:
        recorded = restored(fmt, document, lambda: [m.message for m in read().messages])
    except RecordError as error:
        raise InvalidSource(source, where, str(error)) from None
    located = [
        Located(message, f"{where} message {number}")
        for number, message in enumerate(recorded or [], start=1)
    ]
    return Conversation(source, where, session, located, stored_ids=True)
