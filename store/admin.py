"""Administration across tenants, outside the store's contract.

A store is opened for one tenant and never sees another's rows. An administrator of a
database sometimes needs the whole picture: :func:`list_tenants` lists every tenant
with its totals. It reads only (a database without chatledger's schema is refused with
:class:`~store.errors.MigrationRequired`, and nothing is written to it).
"""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select
from sqlalchemy.engine import URL

from store.models import TenantInfo
from store.sql.drivers.engine import create_engine, normalize_url, sqlite_file
from store.sql.errors import translate_errors
from store.sql.migrations import check_sqlite_file, ensure_schema
from store.sql.schema import SESSIONS

__all__ = ["TenantInfo", "list_tenants"]


async def list_tenants(url: str | URL | None = None) -> list[TenantInfo]:
    """Every tenant of the database at ``url`` (as for ``HistoryStore.open``), by name."""
    with translate_errors():
        target = normalize_url(url)
        path = sqlite_file(target)
        if path is not None:
            await asyncio.to_thread(check_sqlite_file, path, create=False)
        engine = create_engine(target)
        try:
            await ensure_schema(engine, create=False)
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
            async with engine.connect() as conn:
                rows = (await conn.execute(query)).all()
        finally:
            await engine.dispose()
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
