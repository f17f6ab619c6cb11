"""Row-level helpers shared by the store's operations (all filtered by tenant)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import SessionNotFound
from store.schema import SessionRow

__all__ = ["CHUNK", "chunks", "create_session", "lock_session", "now", "read_session"]

T = TypeVar("T")

CHUNK = 500
"""Rows per multi-row statement (well under every driver's bound-parameter limit)."""

SESSIONS = cast(Table, SessionRow.__table__)


def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Split ``items`` into slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _where(tenant: str, session_id: str) -> Iterable[Any]:
    return (SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)


KEYS = (SESSIONS.c.tenant == bindparam("tenant"), SESSIONS.c.session_id == bindparam("session_id"))
"""The session key as bound parameters: prebuilt statements skip most per-call work."""
_READ_SESSION = select(SESSIONS).where(*KEYS)
_LOCK_SESSION = _READ_SESSION.with_for_update()


async def read_session(conn: AsyncConnection, tenant: str, session_id: str) -> RowMapping:
    """The session's row; :class:`SessionNotFound` when absent."""
    params = {"tenant": tenant, "session_id": session_id}
    row = (await conn.execute(_READ_SESSION, params)).mappings().first()
    if row is None:
        raise SessionNotFound(session_id, tenant=tenant)
    return row


async def create_session(
    conn: AsyncConnection, tenant: str, session_id: str, *, tokenizer: str
) -> None:
    """Insert the session's row unless it exists (never fails on a concurrent create)."""
    stamp = now()
    values = {
        "tenant": tenant,
        "session_id": session_id,
        "created_at": stamp,
        "updated_at": stamp,
        "metadata": {},
        "tokenizer": tokenizer,
    }
    if conn.dialect.name == "postgresql":
        pg = pg_insert(SESSIONS).values(**values).on_conflict_do_nothing()
        await conn.execute(pg)
    else:
        lite = sqlite_insert(SESSIONS).values(**values).on_conflict_do_nothing()
        await conn.execute(lite)


async def lock_session(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    create_with_tokenizer: str | None = None,
) -> RowMapping:
    """Read the session's row for update (row lock on PostgreSQL; SQLite holds the write lock).

    With ``create_with_tokenizer``, a missing session is created first.
    """
    query = _LOCK_SESSION if conn.dialect.name == "postgresql" else _READ_SESSION
    params = {"tenant": tenant, "session_id": session_id}
    row = (await conn.execute(query, params)).mappings().first()
    if row is None and create_with_tokenizer is not None:
        await create_session(conn, tenant, session_id, tokenizer=create_with_tokenizer)
        row = (await conn.execute(query, params)).mappings().first()
    if row is None:
        raise SessionNotFound(session_id, tenant=tenant)
    return row
