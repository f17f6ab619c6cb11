"""Exporting sessions in the formats that :mod:`store.importing` reads.

:func:`export_sessions` yields the text of the export, chunk by chunk (a line at a time
for the JSONL formats), so that a large session streams. The shapes:

- ``jsonl``: chatledger's own, one message a line (see
  :func:`store.importing.readers.jsonl.line_of`): lossless, and importing it again gives
  back exactly the same messages in the same sessions.
- ``openai-chat``: one session a line, ``{"id": SESSION, "messages": [...]}``.
- ``openai-responses``: one session a line, ``{"id": SESSION, "input": [...]}``.
- ``anthropic``: one request body a line, ``{"id": SESSION, "system": ..., "messages":
  [...]}`` (``system`` only when the session has system messages).
- ``langchain``: one session a line, ``{"session_id": SESSION, "messages": [...]}`` in
  ``message_to_dict`` form.
- ``agent-framework``: one JSON document, a list of ``AgentSession.to_dict()`` objects
  whose history is under ``state["in_memory"]["messages"]``.

The full stored history is exported (excluded messages included); with ``context`` the
request context instead: what the model is sent next, through ``strategy`` (a spec), or
else the strategy the provider recorded for the session, or else the active messages as
stored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.formats import (
    anthropic_request,
    to_agent_framework,
    to_langchain,
    to_openai_chat,
    to_openai_responses,
)
from store.importing.readers.jsonl import line_of
from strategies.messages import Message

__all__ = ["EXPORT_FORMATS", "export_sessions"]


def _chat(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, "messages": to_openai_chat(messages)}


def _responses(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, "input": to_openai_responses(messages)}


def _anthropic(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"id": session_id, **anthropic_request(messages)}


def _langchain(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {"session_id": session_id, "messages": to_langchain(messages)}


def _agent_framework(session_id: str, messages: Sequence[Message]) -> dict[str, Any]:
    return {
        "type": "session",
        "session_id": session_id,
        "service_session_id": None,
        "state": {"in_memory": {"messages": to_agent_framework(messages)}},
    }


_SESSION_WRITERS: dict[str, Callable[[str, Sequence[Message]], dict[str, Any]]] = {
    "openai-chat": _chat,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "langchain": _langchain,
    "agent-framework": _agent_framework,
}

EXPORT_FORMATS: tuple[str, ...] = ("jsonl", *_SESSION_WRITERS)
"""The format ids that can be exported."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _context(store: HistoryBackend, session_id: str, strategy: str | None) -> list[Message]:
    from store.provider import BEFORE_STRATEGY_KEY

    await store.session(session_id)  # SessionNotFound for an unknown id
    if strategy is None:
        recorded = (await store.get_metadata(session_id)).get(BEFORE_STRATEGY_KEY)
        strategy = recorded if isinstance(recorded, str) else None
    return await store.context(session_id, strategy=strategy)


async def _jsonl(
    store: HistoryBackend, session_id: str, context: bool, strategy: str | None
) -> AsyncIterator[str]:
    if context:
        for seq, message in enumerate(await _context(store, session_id, strategy), start=1):
            yield _dumps(line_of(session_id, seq, message, None, None)) + "\n"
        return
    async for row in store.aiter_history(session_id, include_excluded=True):
        line = line_of(session_id, row.seq, row.message, row.source_system, row.source_id)
        yield _dumps(line) + "\n"


async def _messages(
    store: HistoryBackend, session_id: str, context: bool, strategy: str | None
) -> list[Message]:
    if context:
        return await _context(store, session_id, strategy)
    return [row.message async for row in store.aiter_history(session_id, include_excluded=True)]


async def export_sessions(
    store: HistoryBackend,
    session_ids: Sequence[str],
    *,
    format: str,
    context: bool = False,
    strategy: str | None = None,
) -> AsyncIterator[str]:
    """Yield the export of ``session_ids`` in ``format`` (one of :data:`EXPORT_FORMATS`),
    as text chunks to write one after another.

    ``context`` exports the request context instead of the full history; ``strategy``
    (a spec) is the strategy it is projected with. An unknown format or a strategy
    without ``context`` is :class:`~store.errors.InvalidInput`; an unknown session
    :class:`~store.errors.SessionNotFound`, raised before its first chunk.
    """
    if format not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown format {format!r} (known: {', '.join(EXPORT_FORMATS)})")
    if strategy is not None and not context:
        raise InvalidInput("a strategy applies to the context only (pass context=True)")
    for session_id in session_ids:
        await store.session(session_id)
    if format == "jsonl":
        for session_id in session_ids:
            async for chunk in _jsonl(store, session_id, context, strategy):
                yield chunk
        return
    write = _SESSION_WRITERS[format]
    if format == "agent-framework":
        sessions = [write(s, await _messages(store, s, context, strategy)) for s in session_ids]
        yield json.dumps(sessions, ensure_ascii=False, indent=2) + "\n"
        return
    for session_id in session_ids:
        messages = await _messages(store, session_id, context, strategy)
        yield _dumps(write(session_id, messages)) + "\n"
