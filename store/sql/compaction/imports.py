"""Importing Agent Framework's compacted history into SQL.

The plan is the shared rule (:mod:`store.rules.imported`, pure functions over
records): the session's stored ids are loaded into a mirror, the plain messages are
appended, and the annotations become one ``import`` event of exclusions and summary
groups.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import SessionNotFound
from store.rules.records import SessionRecord
from store.sql.compaction.mirror import Mirror, load_rows, mirror_of
from store.sql.schema import MESSAGES
from store.sql.sessions import read_session
from strategies.messages import Message

__all__ = ["mark_imported", "stored_rows"]


async def stored_rows(conn: AsyncConnection, tenant: str, session_id: str) -> SessionRecord | None:
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
