"""Streaming a session's whole history: the session read once, then pages by ``seq``.

:func:`stream_history` reads the session's row once (:class:`~store.errors.SessionNotFound`
when absent) and then keyset pages of ``page_size`` rows (``seq > last seen``), all on
one connection, instead of a connection and a session read for every page. Each row is
mapped to its :class:`~store.models.StoredMessage` only when it is handed out, so a
consumer that does not keep the messages never holds a page of them at once (fewer
objects survive into the garbage collector's older generations). A corrupt row raises
:class:`~store.errors.CorruptRowError` when the iteration reaches it.

How long a transaction stays open differs by dialect:

* SQLite: the whole iteration is one read transaction, so it sees one snapshot of the
  session. In WAL mode (which :mod:`store.engine` sets) a reader never blocks writers;
  the cost of a slow consumer is only that checkpoints cannot pass the snapshot until
  the iteration ends.
* PostgreSQL: each page is read in its own short transaction, committed before the
  page's messages are handed out. A transaction left open while the caller works on
  the messages would hold back vacuum's horizon for the whole cluster, hold a lock that
  makes an ``ALTER TABLE`` (and every query queued behind it) wait, and could be ended
  by ``idle_in_transaction_session_timeout``. The connection stays checked out, idle,
  between pages.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from sqlalchemy.ext.asyncio import AsyncEngine

from store._read import COLUMN_INDEX, read_page_rows, stored_message
from store._rows import read_session
from store.errors import InvalidInput, check_session_id, translate_errors
from store.models import StoredMessage

__all__ = ["PAGE_SIZE", "stream_history"]

PAGE_SIZE = 500
"""Rows per page when none is given."""

_SEQ = COLUMN_INDEX["seq"]
_GROUP = COLUMN_INDEX["group_id"]


async def stream_history(
    engine: AsyncEngine,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool = False,
    after: int | None = None,
    before: int | None = None,
    page_size: int = PAGE_SIZE,
) -> AsyncGenerator[StoredMessage, None]:
    """The session's stored messages, oldest first, read ``page_size`` at a time.

    ``after`` and ``before`` are exclusive ``seq`` bounds; excluded messages are left
    out unless ``include_excluded``. Raises only :class:`~store.errors.ChatledgerError`:
    :class:`~store.errors.SessionNotFound` at the first step when the session is absent,
    :class:`~store.errors.CorruptRowError` at a row that does not validate.
    """
    check_session_id(session_id)
    if page_size < 1:
        raise InvalidInput("page_size must be >= 1")
    with translate_errors():
        async with engine.connect() as conn:
            short_transactions = conn.dialect.name != "sqlite"
            await read_session(conn, tenant, session_id)
            cursor = after
            while True:
                rows, kinds = await read_page_rows(
                    conn,
                    tenant,
                    session_id,
                    include_excluded=include_excluded,
                    after=cursor,
                    before=before,
                    limit=page_size,
                )
                if short_transactions:
                    await conn.commit()
                for row in rows:
                    yield stored_message(
                        row, kinds.get(row[_GROUP]), tenant=tenant, session_id=session_id
                    )
                if len(rows) < page_size:
                    return
                cursor = rows[-1][_SEQ]
