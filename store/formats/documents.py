"""One session as one document of a format, with chatledger's record of the session:
what ``chatledger export`` writes, and what ``chatledger import`` recognises.

The documents, one JSON object a session:

- ``openai-chat``: ``{"id": SESSION, "messages": [...]}``;
- ``openai-responses``: ``{"id": SESSION, "input": [...]}``;
- ``anthropic``: ``{"id": SESSION, "system": ..., "messages": [...]}`` (``system`` only
  when the session has system messages);
- ``langchain``: ``{"session_id": SESSION, "messages": [...]}``, ``message_to_dict``
  form, each message's ``id`` its chatledger id;
- ``pydantic-ai``: ``{"id": SESSION, "messages": [...]}``, the messages those
  ``ModelMessagesTypeAdapter`` reads;
- ``vercel-ai``: ``{"id": SESSION, "messages": [...]}``, the ``UIMessage[]`` of a chat;
- ``agent-framework``: ``AgentSession.to_dict()``, ``{"type": "session", "session_id":
  SESSION, "service_session_id": null, "state": {"in_memory": {"messages": [...]}}}``.

The record sits beside the messages under :data:`RECORD_KEY`, never inside them, so that
the messages stay what the target's own types accept; the targets read the document's
messages and ignore the rest. It takes one of two forms:

- ``{"version": 1, "format": F, "message_ids": [...], "created_at": [...]}`` when the
  document's messages read back one for one as the stored messages but for their ids
  and times (a session exported to the format it came from): the ids and times, in
  order (``created_at`` holds ``null`` for a message without a time);
- ``{"version": 1, "format": F, "messages": [...]}`` otherwise: every stored message in
  chatledger's storage form (:data:`~strategies.messages.MESSAGES_ADAPTER`), because
  the format cannot carry all of it (another format's details, reasoning, times).

:func:`session_document` writes a document with its record; :func:`restored` gives the
stored messages back from one, so that importing an export into the store it came from
stores nothing new, and into another rebuilds the same messages. A record that no
longer matches its document (the messages were edited after the export) is refused
with :class:`RecordError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from store.formats._common import FormatError, describe_validation, shown
from store.formats.agent_framework import from_agent_framework, to_agent_framework
from store.formats.anthropic import anthropic_request, from_anthropic
from store.formats.langchain import from_langchain, to_langchain
from store.formats.openai_chat import from_openai_chat, to_openai_chat
from store.formats.openai_responses import from_openai_responses, to_openai_responses
from store.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from store.formats.vercel_ai import from_vercel_ai, to_vercel_ai
from strategies.errors import ChatledgerError
from strategies.messages import MESSAGES_ADAPTER, Message

__all__ = [
    "DOCUMENT_FORMATS",
    "RECORD_KEY",
    "RECORD_VERSION",
    "RecordError",
    "document_messages",
    "restored",
    "session_document",
    "state_messages",
]

RECORD_KEY = "chatledger"
"""The document key of chatledger's record of the session."""

RECORD_VERSION = 1
"""The ``version`` of the records this release writes and reads."""

_TIMES: TypeAdapter[list[datetime | None]] = TypeAdapter(list[datetime | None])
_IDS: TypeAdapter[list[str]] = TypeAdapter(list[str])


class RecordError(ChatledgerError, ValueError):
    """A chatledger record that cannot be read, or that its document no longer matches."""


def state_messages(state: Any) -> list[Any]:
    """The messages of an ``AgentSession.to_dict()`` state: those of every history
    provider's entry (``state[...]["messages"]``), in order."""
    found: list[Any] = []
    entries = state.values() if isinstance(state, dict) else ()
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("messages"), list):
            found.extend(entry["messages"])
    return found


def _chat(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, "messages": to_openai_chat(messages)}


def _responses(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, "input": to_openai_responses(messages)}


def _anthropic(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, **anthropic_request(messages)}


def _langchain(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"session_id": session_id, "messages": to_langchain(messages, with_ids=True)}


def _pydantic_ai(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, "messages": to_pydantic_ai(messages)}


def _vercel_ai(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, "messages": to_vercel_ai(messages)}


def _agent_framework(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {
        "type": "session",
        "session_id": session_id,
        "service_session_id": None,
        "state": {"in_memory": {"messages": to_agent_framework(messages)}},
    }


_WRITERS: dict[str, Callable[[str, Sequence[Message]], dict[str, Any]]] = {
    "openai-chat": _chat,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "langchain": _langchain,
    "pydantic-ai": _pydantic_ai,
    "vercel-ai": _vercel_ai,
    "agent-framework": _agent_framework,
}

_READERS: dict[str, Callable[[dict[str, Any]], list[Message]]] = {
    "openai-chat": lambda d: from_openai_chat(d["messages"]),
    "openai-responses": lambda d: from_openai_responses(d["input"]),
    "anthropic": lambda d: from_anthropic(d["messages"], system=d.get("system")),
    "langchain": lambda d: from_langchain(d["messages"]),
    "pydantic-ai": lambda d: from_pydantic_ai(d["messages"]),
    "vercel-ai": lambda d: from_vercel_ai(d["messages"]),
    "agent-framework": lambda d: from_agent_framework(state_messages(d.get("state"))),
}

_ID_KEYS = {"langchain": "session_id", "agent-framework": "session_id"}

DOCUMENT_FORMATS: tuple[str, ...] = tuple(_WRITERS)
"""The format ids whose sessions are written as one document each."""


def document_messages(fmt: str, document: dict[str, Any]) -> list[Message]:
    """The messages of ``document`` as the format reads them (its record aside).
    :class:`~store.formats.FormatError` for messages the converter cannot read."""
    return _READERS[fmt](document)


def _rebuilt(read: Sequence[Message], messages: Sequence[Message]) -> bool:
    """Whether ``read`` is ``messages`` one for one, but for ids and times."""
    return len(read) == len(messages) and all(
        _identified(found, message.message_id, message.created_at) == message
        for found, message in zip(read, messages, strict=True)
    )


def _identified(message: Message, message_id: str, created_at: datetime | None) -> Message:
    return message.model_copy(update={"message_id": message_id, "created_at": created_at})


def _record(fmt: str, document: dict[str, Any], messages: Sequence[Message]) -> dict[str, Any]:
    record: dict[str, Any] = {"version": RECORD_VERSION, "format": fmt}
    try:
        read = document_messages(fmt, document)
    except FormatError:
        read = []  # what the reader refuses (a custom role): the messages are recorded
    if _rebuilt(read, messages):
        record["message_ids"] = [m.message_id for m in messages]
        record["created_at"] = _TIMES.dump_python([m.created_at for m in messages], mode="json")
    else:
        record["messages"] = MESSAGES_ADAPTER.dump_python(list(messages), mode="json")
    return record


def session_document(
    fmt: str, session_id: str, messages: Sequence[Message], *, record: bool = True
) -> dict[str, Any]:
    """The document of session ``session_id`` in ``fmt`` (one of
    :data:`DOCUMENT_FORMATS`), with its record under :data:`RECORD_KEY` unless
    ``record`` is false."""
    document = _WRITERS[fmt](session_id, messages)
    if record:
        document[RECORD_KEY] = _record(fmt, document, messages)
    return document


def _checked(fmt: str, record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise RecordError(f"{RECORD_KEY!r} must be an object (chatledger's record)")
    if record.get("version") != RECORD_VERSION:
        raise RecordError(f"unsupported chatledger record version {shown(record.get('version'))}")
    if record.get("format") != fmt:
        raise RecordError(f"a chatledger record of {shown(record.get('format'))}, not of {fmt}")
    return record


def _recorded(fmt: str, document: dict[str, Any], entries: Any) -> list[Message]:
    """The messages recorded whole, once their document is what they write."""
    try:
        messages = MESSAGES_ADAPTER.validate_python(entries, context={"allow_custom_roles": True})
    except ValidationError as error:
        raise RecordError(f"chatledger record: {describe_validation(error)}") from None
    session_id = document.get(_ID_KEYS.get(fmt, "id"))
    written = _WRITERS[fmt](session_id if isinstance(session_id, str) else "", messages)
    if written != {k: v for k, v in document.items() if k != RECORD_KEY}:
        raise RecordError(
            "the messages differ from chatledger's record of them (edited after the "
            f"export?): remove the {RECORD_KEY!r} key to import them as they are"
        )
    return messages


def _identities(record: dict[str, Any], read: Sequence[Message]) -> list[Message]:
    """``read`` with the ids and times of the record."""
    try:
        ids = _IDS.validate_python(record.get("message_ids"))
        times = _TIMES.validate_python(record.get("created_at", [None] * len(ids)))
    except ValidationError as error:
        raise RecordError(f"chatledger record: {describe_validation(error)}") from None
    if not len(ids) == len(times) == len(read):
        raise RecordError(
            f"chatledger's record names {len(ids)} messages, the document holds {len(read)} "
            f"(edited after the export?): remove the {RECORD_KEY!r} key to import them as "
            "they are"
        )
    if not all(ids):
        raise RecordError("chatledger record: a message id is empty")
    return [_identified(m, i, t) for m, i, t in zip(read, ids, times, strict=True)]


def restored(
    fmt: str, document: dict[str, Any], read: Callable[[], Sequence[Message]]
) -> list[Message] | None:
    """The stored messages that ``document`` records, or None when it has no record.

    ``read`` gives the document's messages as the format reads them (called only for a
    record of ids and times). :class:`RecordError` for a record that cannot be read or
    that the document no longer matches.
    """
    if RECORD_KEY not in document:
        return None
    record = _checked(fmt, document[RECORD_KEY])
    if "messages" in record:
        return _recorded(fmt, document, record["messages"])
    return _identities(record, read())
