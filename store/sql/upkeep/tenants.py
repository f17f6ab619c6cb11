"""The administrator's listing of a database's tenants, with their totals: the one read
that crosses tenants (every other query is filtered by the store's tenant)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store.models import TenantInfo
from store.sql.schema import SESSIONS

__all__ = ["read_tenants"]


async def read_tenants(conn: AsyncConnection) -> list[TenantInfo]:
    """Every tenant that holds a session, by name, with its sessions' totals (one
    aggregate over the sessions table)."""
    s = SESSIONS.c
    query = (
        select(
            s.tenant,
            func.count(),
            func.coalesce(func.sum(s.stored_messages), 0),
            func.coalesce(func.sum(s.stored_tokens), 0),
            func.max(s.updated_at),
        )
        .group_by(s.tenant)
        .order_by(s.tenant)
    )
    rows = (await conn.execute(query)).all()
    return [
        TenantInfo(
            tenant=row[0],
            sessions=int(row[1]),
            stored_messages=int(row[2]),
            stored_tokens=int(row[3]),
            updated_at=row[4],
        )
        for row in rows
    ]
