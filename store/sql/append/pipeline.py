"""The insert pipeline of an append: the loop that sends the rows of each slice to the
driver while the next slice is built (the statements are :mod:`store.sql.append.inserts`').
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from store.sql.append.counting import BackgroundCounts
from store.sql.append.inserts import (
    INSERT_CHUNK,
    Statement,
    execute_inserts,
    group_insert,
    message_insert,
)
from store.sql.append.rows import NewGroups, RowBuilder

__all__ = ["insert_messages"]

_YIELD_EVERY = 50
"""Messages built between two turns of the event loop while a write is in flight (so
the next statement of the write starts without waiting for the whole slice)."""


async def insert_messages(
    conn: AsyncConnection,
    builder: RowBuilder,
    groups: NewGroups | None = None,
    counts: BackgroundCounts | None = None,
) -> None:
    """Insert the rows slice by slice, building the next slice while the driver writes.

    Where the driver works outside the interpreter lock (PostgreSQL's socket, or
    aiosqlite's thread outside :func:`~store.sql.drivers.sqlite.short_statements`; inside
    it SQLite runs the slices inline), building slice ``k + 1`` overlaps writing slice
    ``k`` and the rows of the ``groups`` it completed (the loop turns every few
    messages, so that the groups' statement starts when the messages' ends). Only one
    statement is ever in flight on the connection. ``counts``, when given, holds the
    slices' token counts made in the counting thread (:mod:`store.sql.append.counting`).
    """
    total = len(builder.fresh)
    binds = message_insert(conn.dialect)
    group_binds = group_insert(conn.dialect) if groups is not None else None
    writing: asyncio.Task[Any] | None = None
    try:
        for start in range(0, total, INSERT_CHUNK):
            stop = min(total, start + INSERT_CHUNK)
            rows: list[tuple[Any, ...]] = []
            counted = await counts.get(start, stop) if counts is not None else None
            for part in range(start, stop, _YIELD_EVERY):
                end = min(stop, part + _YIELD_EVERY)
                some = counted[part - start : end - start] if counted is not None else None
                rows += builder.rows(part, end, binds, some)
                if writing is not None and not writing.done():
                    await asyncio.sleep(0)  # lets the write go on to its next statement
            statements: list[Statement] = [(binds, rows)]
            if groups is not None and group_binds is not None:
                ready = groups.ready(stop, group_binds, final=stop == total)
                if ready:
                    statements.append((group_binds, ready))
            if writing is not None:
                await writing
            writing = asyncio.ensure_future(execute_inserts(conn, statements))
            await asyncio.sleep(0)  # let the insert reach the driver
        if writing is not None:
            await writing
    finally:
        if writing is not None:
            if not writing.done():
                await asyncio.wait([writing])
            if not writing.cancelled():
                writing.exception()  # retrieved: an error raised above takes precedence
