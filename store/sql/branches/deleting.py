"""Deleting a session that forks read: its id is freed at once, the rows they read stay.

Before a session is deleted (or purged), :func:`keep_for_forks` moves its message rows,
when another branch reads them, under a new session of branch ``kept`` (listed nowhere)
and points the readers' lineage and branch rows to it; the forks' ``parent_session_id``
becomes None. After a deletion, :func:`collect` deletes the kept sessions that no branch
reads any more, so rows stay exactly until the last branch reading them is deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.rules.records import now
from store.sql.branches.sharing import readers_of
from store.sql.schema import BRANCH_ROWS, LINEAGE, MESSAGES, SESSIONS
from store.sql.sessions import incarnation, metadata_value

__all__ = ["KEPT", "collect", "keep_for_forks", "owners_read_by", "tails_of"]

KEPT = "kept"
"""The ``branch`` of a session that holds a deleted session's rows for its forks."""


async def tails_of(conn: AsyncConnection, tenant: str, session_id: str) -> list[str]:
    """The superseded tails of the session (deleted with it)."""
    s = SESSIONS.c
    query = select(s.session_id).where(
        s.tenant == tenant, s.parent_session_id == session_id, s.branch == "tail"
    )
    return [str(r[0]) for r in await conn.execute(query)]


async def owners_read_by(
    conn: AsyncConnection, tenant: str, session_ids: Sequence[str]
) -> set[str]:
    """The sessions whose rows ``session_ids`` read."""
    lin = LINEAGE.c
    query = select(lin.owner_session_id).where(
        lin.tenant == tenant, lin.session_id.in_(list(session_ids))
    )
    return {str(r[0]) for r in await conn.execute(query)}


async def keep_for_forks(conn: AsyncConnection, tenant: str, session_ids: Sequence[str]) -> int:
    """Move the rows of each of ``session_ids`` that other branches read under a kept
    session; the messages kept."""
    doomed = set(session_ids)
    kept = 0
    s = SESSIONS.c
    for session_id in session_ids:
        await conn.execute(
            update(SESSIONS)
            .where(s.tenant == tenant, s.parent_session_id == session_id, s.branch == "fork")
            .values(parent_session_id=None)
        )
        readers = [r for r in await readers_of(conn, tenant, session_id) if r not in doomed]
        if not readers:
            continue
        tokenizer = (
            await conn.execute(
                select(s.tokenizer).where(s.tenant == tenant, s.session_id == session_id)
            )
        ).scalar_one()
        holder = f"kept-{uuid.uuid4().hex}"
        stamp = now()
        await conn.execute(
            SESSIONS.insert().values(
                tenant=tenant,
                session_id=holder,
                created_at=stamp,
                updated_at=stamp,
                incarnation=incarnation(),
                metadata=metadata_value(tenant, holder, {}),
                tokenizer=tokenizer,
                branch=KEPT,
                shared=True,
            )
        )
        moved = await conn.execute(
            update(MESSAGES)
            .where(MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id)
            .values(session_id=holder)
        )
        kept += int(moved.rowcount or 0)
        for table in (LINEAGE, BRANCH_ROWS):
            await conn.execute(
                update(table)
                .where(table.c.tenant == tenant, table.c.owner_session_id == session_id)
                .values(owner_session_id=holder)
            )
    return kept


async def collect(conn: AsyncConnection, tenant: str, owners: set[str]) -> None:
    """Delete the kept sessions among ``owners`` that no branch reads any more."""
    s = SESSIONS.c
    for owner in sorted(owners):
        branch = (
            await conn.execute(select(s.branch).where(s.tenant == tenant, s.session_id == owner))
        ).scalar_one_or_none()
        if branch != KEPT or await readers_of(conn, tenant, owner):
            continue
        await conn.execute(
            delete(MESSAGES).where(MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == owner)
        )
        await conn.execute(delete(SESSIONS).where(s.tenant == tenant, s.session_id == owner))
