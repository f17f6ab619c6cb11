"""Read queries: history pages and session listings (always filtered by tenant).

JSON columns are read as text and decoded while mapping each row, so that a row
holding invalid JSON is reported as a :class:`~store.errors.CorruptRowError` naming its
``seq`` rather than failing somewhere inside the driver.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, Text, select
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import Select

from store._rows import chunks
from store.models import SessionInfo, StoredMessage, message_from_row, session_from_row
from store.schema import GroupRow, MessageRow, SessionRow

__all__ = ["message_columns", "read_history", "read_sessions"]

MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)

_JSON_COLUMNS = ("contents", "metadata", "reduced_contents")


def message_columns() -> list[Any]:
    columns: list[Any] = []
    for column in MESSAGES.c:
        if column.key in _JSON_COLUMNS:
            columns.append(sql_cast(column, Text).label(column.key))
        else:
            columns.append(column)
    return columns


def history_query(
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool,
    limit: int | None,
    before: int | None,
    after: int | None,
) -> Select[Any]:
    """The query for one page of a session's history, by ``seq``."""
    query = select(*message_columns()).where(
        MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id
    )
    if not include_excluded:
        query = query.where(MESSAGES.c.excluded.is_(False))
    if after is not None:
        query = query.where(MESSAGES.c.seq > after)
    if before is not None:
        query = query.where(MESSAGES.c.seq < before)
        if limit is not None:
            # the newest ``limit`` messages before ``before``, returned oldest first
            return query.order_by(MESSAGES.c.seq.desc()).limit(limit)
    query = query.order_by(MESSAGES.c.seq)
    if limit is not None:
        query = query.limit(limit)
    return query


async def group_kinds(
    conn: AsyncConnection, tenant: str, session_id: str, group_ids: Iterable[str]
) -> dict[str, str]:
    """The kind of each of ``group_ids`` (looked up by primary key, never by a join)."""
    kinds: dict[str, str] = {}
    for part in chunks(sorted(group_ids)):
        query = select(GROUPS.c.group_id, GROUPS.c.kind).where(
            GROUPS.c.tenant == tenant,
            GROUPS.c.session_id == session_id,
            GROUPS.c.group_id.in_(part),
        )
        kinds.update((row[0], row[1]) for row in await conn.execute(query))
    return kinds


async def read_history(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    include_excluded: bool = False,
    limit: int | None = None,
    before: int | None = None,
    after: int | None = None,
) -> list[StoredMessage]:
    """One page of history, oldest first."""
    query = history_query(
        tenant,
        session_id,
        include_excluded=include_excluded,
        limit=limit,
        before=before,
        after=after,
    )
    rows = (await conn.execute(query)).mappings().all()
    kinds = await group_kinds(conn, tenant, session_id, {row["group_id"] for row in rows})
    out = [
        message_from_row(
            {**row, "kind": kinds.get(row["group_id"])}, tenant=tenant, session_id=session_id
        )
        for row in rows
    ]
    out.sort(key=lambda m: m.seq)
    return out


async def read_sessions(
    conn: AsyncConnection,
    tenant: str,
    *,
    limit: int | None = None,
    after: str | None = None,
    updated_since: datetime | None = None,
) -> list[SessionInfo]:
    """Sessions of ``tenant`` ordered by id, after the ``after`` id."""
    query = select(SESSIONS).where(SESSIONS.c.tenant == tenant)
    if after is not None:
        query = query.where(SESSIONS.c.session_id > after)
    if updated_since is not None:
        query = query.where(SESSIONS.c.updated_at >= updated_since)
    query = query.order_by(SESSIONS.c.session_id)
    if limit is not None:
        query = query.limit(limit)
    rows = (await conn.execute(query)).mappings().all()
    return [session_from_row(row) for row in rows]
