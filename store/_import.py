"""Importing Agent Framework's compacted history into SQL.

The planning is shared with the in-memory store (:mod:`store.memory._af_import`, pure
functions over plain rows): the session's stored ids are loaded into a mirror, the
plain messages are appended, and the annotations become one ``import`` event of
exclusions and summary groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from sqlalchemy import Table, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store._mirror import Mirror, mirror_of
from store._mirror_load import load_rows
from store._rows import read_session
from store.errors import SessionNotFound
from store.memory._state import SessionData
from store.schema import MessageRow
from strategies.messages import Message

__all__ = ["mark_imported", "stored_rows"]

MESSAGES = cast(Table, MessageRow.__table__)


async def stored_rows(conn: AsyncConnection, tenant: str, session_id: str) -> SessionData | None:
    """The session's message ids, groups and source ids (None when it does not exist)."""
    try:
        session = await read_session(conn, tenant, session_id)
    except SessionNotFound:
        return None
    mirror: Mirror = mirror_of(session)
    await load_rows(conn, mirror, MESSAGES.c.seq.is_not(None))
    return mirror.session


async def mark_imported(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    summaries: Sequence[Message],
    *,
    source: str,
    source_ids: dict[str, str],
) -> None:
    """Record ``source`` as the provenance of imported summaries stored without one."""
    for message in summaries:
        await conn.execute(
            update(MESSAGES)
            .where(
                MESSAGES.c.tenant == tenant,
                MESSAGES.c.session_id == session_id,
                MESSAGES.c.message_id == message.message_id,
                MESSAGES.c.source_system.is_(None),
            )
            .values(
                source_system=source,
                source_id=source_ids.get(message.message_id),
                imported_at=MESSAGES.c.stored_at,
            )
        )
