"""Exporting sessions in the formats that :mod:`store.importing` reads.

:func:`export_sessions` yields the text of the export, chunk by chunk (a line at a time
for the JSONL formats), so that a large session streams. The shapes:

- ``jsonl``: chatledger's own, one message a line (see
  :func:`store.importing.readers.jsonl.line_of`): lossless, and importing it again gives
  back exactly the same messages in the same sessions. A fork's first line names its
  parent and its fork message, so that the import makes it a fork again.
- ``openai-chat``, ``openai-responses``, ``anthropic``, ``langchain``, ``pydantic-ai``,
  ``vercel-ai``: one session a line, the document of
  :func:`store.formats.documents.session_document`;
- ``agent-framework``: one JSON document, a list of those documents
  (``AgentSession.to_dict()`` objects whose history is under
  ``state["in_memory"]["messages"]``).

Each document carries chatledger's record of its session beside the target's messages
(see :mod:`store.formats.documents`): importing the export into the same store stores
nothing new, and into another gives back the same messages, ids and times included.

The full stored history is exported (excluded messages included); with ``context`` the
request context instead: what the model is sent next, through ``strategy`` (a spec), or
else the strategy the provider recorded for the session, or else the active messages as
stored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.formats.documents import DOCUMENT_FORMATS, session_document
from store.importing.readers.jsonl import line_of
from store.importing.source import ForkOrigin
from strategies.messages import Message

__all__ = ["EXPORT_FORMATS", "export_sessions"]

EXPORT_FORMATS: tuple[str, ...] = ("jsonl", *DOCUMENT_FORMATS)
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
    info = await store.session(session_id)
    fork = None
    if info.parent_session_id is not None:
        fork = ForkOrigin(info.parent_session_id, info.fork_message_id)
    async for row in store.aiter_history(session_id, include_excluded=True):
        line = line_of(
            session_id, row.seq, row.message, row.source_system, row.source_id, fork=fork
        )
        fork = None  # on the session's first line only
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
    record: bool = True,
) -> AsyncIterator[str]:
    """Yield the export of ``session_ids`` in ``format`` (one of :data:`EXPORT_FORMATS`),
    as text chunks to write one after another.

    ``context`` exports the request context instead of the full history; ``strategy``
    (a spec) is the strategy it is projected with. ``record=False`` leaves chatledger's
    record out of every session document (the export then holds the target's messages
    only, and importing it again stores the sessions again); ``jsonl`` is that record.
    An unknown format or a strategy without ``context`` is
    :class:`~store.errors.InvalidInput`; an unknown session
    :class:`~store.errors.SessionNotFound`, raised before its first chunk.
    """
    if format not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown format {format!r} (known: {', '.join(EXPORT_FORMATS)})")
    if strategy is not None and not context:
        raise InvalidInput("a strategy applies to the context only (pass context=True)")
    if not isinstance(record, bool):
        raise InvalidInput(f"record must be a bool, got {type(record).__name__}")
    for session_id in session_ids:
        await store.session(session_id)
    if format == "jsonl":
        for session_id in session_ids:
            async for chunk in _jsonl(store, session_id, context, strategy):
                yield chunk
        return
    if format == "agent-framework":
        sessions = [
            session_document(format, s, await _messages(store, s, context, strategy), record=record)
            for s in session_ids
        ]
        yield json.dumps(sessions, ensure_ascii=False, indent=2) + "\n"
        return
    for session_id in session_ids:
        messages = await _messages(store, session_id, context, strategy)
        yield _dumps(session_document(format, session_id, messages, record=record)) + "\n"
