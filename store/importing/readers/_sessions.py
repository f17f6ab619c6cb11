"""Grouping a database's rows, ordered by session, into conversations."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from store.importing.source import Conversation, Located

__all__ = ["RUN", "by_session"]

RUN = 1000
"""Rows of one session converted and handed on at a time."""


def by_session(
    source: str,
    found: Iterable[tuple[Any, ...]],
    convert: Callable[[str, tuple[Any, ...]], Located],
) -> Iterator[Conversation]:
    """Conversations of rows ``(row id, session id, ...)`` ordered by session then row."""
    run: Conversation | None = None
    for row in found:
        session = str(row[1])
        if run is None or run.source_session != session or len(run.messages) >= RUN:
            if run is not None:
                yield run
            run = Conversation(source, f"session {session}", session)
        run.messages.append(convert(f"row {row[0]}", row))
    if run is not None:
        yield run
