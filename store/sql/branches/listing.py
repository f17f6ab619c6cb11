"""A session's branches: its parent, its forks and its superseded tails."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store.models import BranchInfo
from store.sql.schema import MESSAGES, SESSIONS
from store.sql.sessions import read_session

__all__ = ["read_branches"]


async def read_branches(conn: AsyncConnection, tenant: str, session_id: str) -> list[BranchInfo]:
    """The parent (when it still exists), then the forks, then the tails, oldest first."""
    s = SESSIONS.c
    row = await read_session(conn, tenant, session_id)
    found: list[BranchInfo] = []
    parent_id = row["parent_session_id"]
    if row["branch"] == "fork" and parent_id is not None:
        parent = (
            await conn.execute(
                select(s.session_id, s.stored_messages, s.created_at).where(
                    s.tenant == tenant, s.session_id == parent_id, s.branch.is_distinct_from("kept")
                )
            )
        ).first()
        if parent is not None:
            found.append(
                BranchInfo(
                    session_id=parent[0],
                    relation="parent",
                    fork_message_id=row["fork_message_id"],
                    event_id=row["branch_event_id"],
                    messages=int(parent[1]),
                    created_at=parent[2],
                )
            )
    children = (
        await conn.execute(
            select(
                s.session_id,
                s.branch,
                s.fork_message_id,
                s.branch_event_id,
                s.stored_messages,
                s.created_at,
            )
            .where(
                s.tenant == tenant,
                s.parent_session_id == session_id,
                s.branch.in_(("fork", "tail")),
            )
            .order_by(s.created_at, s.session_id)
        )
    ).all()
    forks = [c for c in children if c[1] == "fork"]
    tails = [c for c in children if c[1] == "tail"]
    for child in forks:
        found.append(
            BranchInfo(
                session_id=child[0],
                relation="fork",
                fork_message_id=child[2],
                event_id=child[3],
                messages=int(child[4]),
                created_at=child[5],
            )
        )
    for child in tails:
        own = select(func.count()).where(
            MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == child[0]
        )
        found.append(
            BranchInfo(
                session_id=child[0],
                relation="tail",
                fork_message_id=child[2],
                event_id=child[3],
                messages=int((await conn.execute(own)).scalar() or 0),
                created_at=child[5],
            )
        )
    return found
