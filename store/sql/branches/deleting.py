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
from typing import Any

from sqlalchemy import and_, delete, func, null, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.rules.records import now
from store.sql.branches.resealing import reseal_in_place
from store.sql.branches.rows import read_lineage
from store.sql.branches.sharing import bump_lineage, readers_of
from store.sql.schema import BRANCH_ROWS, LINEAGE, MESSAGES, SESSIONS
from store.sql.sessions import incarnation, metadata_value

__all__ = [
    "KEPT",
    "adopt",
    "collect",
    "count_kept",
    "keep_for_forks",
    "owners_read_by",
    "tails_of",
]

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


async def _kept_rows(conn: AsyncConnection, tenant: str, session_id: str, doomed: set[str]) -> Any:
    """The condition on :data:`~store.sql.schema.MESSAGES` of the session's rows that a
    branch outside ``doomed`` reads (None when none does)."""
    lin, b, m = LINEAGE.c, BRANCH_ROWS.c, MESSAGES.c
    throughs = [
        int(r[1])
        for r in await conn.execute(
            select(lin.session_id, lin.through_seq).where(
                lin.tenant == tenant, lin.owner_session_id == session_id
            )
        )
        if r[0] not in doomed
    ]
    members = [
        int(r[1])
        for r in await conn.execute(
            select(b.session_id, b.seq).where(
                b.tenant == tenant, b.owner_session_id == session_id, b.member
            )
        )
        if r[0] not in doomed
    ]
    if not throughs and not members:
        return None
    conditions = []
    if throughs:
        conditions.append(m.seq <= max(throughs))
    if members:
        conditions.append(m.seq.in_(sorted(set(members))))
    return and_(m.tenant == tenant, m.session_id == session_id, or_(*conditions))


async def count_kept(conn: AsyncConnection, tenant: str, session_ids: Sequence[str]) -> int:
    """The messages :func:`keep_for_forks` would keep for ``session_ids``."""
    doomed = set(session_ids)
    kept = 0
    for session_id in session_ids:
        condition = await _kept_rows(conn, tenant, session_id, doomed)
        if condition is not None:
            kept += int((await conn.execute(select(func.count()).where(condition))).scalar() or 0)
    return kept


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
        condition = await _kept_rows(conn, tenant, session_id, doomed)
        if condition is None:
            continue
        holder = await keep_rows(conn, tenant, session_id, condition, whole=True)
        if holder is not None:
            kept += holder[1]
    return kept


async def keep_rows(
    conn: AsyncConnection, tenant: str, session_id: str, condition: Any, *, whole: bool
) -> tuple[str, int] | None:
    """Move the session's rows matching ``condition`` under a new kept session, and
    point the branches that read them to it (``whole``: the session goes, so every
    reference to it): the holder's id and the rows moved (None: none matched)."""
    s = SESSIONS.c
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
    moved = await conn.execute(update(MESSAGES).where(condition).values(session_id=holder))
    count = int(moved.rowcount or 0)
    if not count:
        await conn.execute(delete(SESSIONS).where(s.tenant == tenant, s.session_id == holder))
        return None
    await reseal_in_place(conn, tenant, MESSAGES, MESSAGES.c.session_id == holder)
    b = BRANCH_ROWS.c
    if whole:  # the session goes: everything that named it names the holder
        readers = select(LINEAGE.c.session_id).where(
            LINEAGE.c.tenant == tenant, LINEAGE.c.owner_session_id == session_id
        )
        await bump_lineage(conn, tenant, [str(r[0]) for r in await conn.execute(readers)])
        for table in (LINEAGE, BRANCH_ROWS):
            await conn.execute(
                update(table)
                .where(table.c.tenant == tenant, table.c.owner_session_id == session_id)
                .values(owner_session_id=holder)
            )
    else:  # some of its rows: the branch rows of those (members) follow them
        seqs = select(MESSAGES.c.seq).where(
            MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == holder
        )
        await conn.execute(
            update(BRANCH_ROWS)
            .where(b.tenant == tenant, b.owner_session_id == session_id, b.seq.in_(seqs))
            .values(owner_session_id=holder)
        )
    return holder, count


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


async def adopt(conn: AsyncConnection, tenant: str, session_id: str, owner: str, seq: int) -> bool:
    """Take the row ``seq`` of the kept session ``owner`` into the session that alone
    still reads it (its last inherited row, which it is about to retract); False when
    the owner is no kept session or another branch reads the row."""
    s, lin, b = SESSIONS.c, LINEAGE.c, BRANCH_ROWS.c
    branch = (
        await conn.execute(select(s.branch).where(s.tenant == tenant, s.session_id == owner))
    ).scalar_one_or_none()
    if branch != KEPT or await readers_of(conn, tenant, owner, seq) != [session_id]:
        return False
    state = (
        (
            await conn.execute(
                select(BRANCH_ROWS).where(
                    b.tenant == tenant,
                    b.session_id == session_id,
                    b.owner_session_id == owner,
                    b.seq == seq,
                )
            )
        )
        .mappings()
        .first()
    )
    values: dict[str, Any] = {"session_id": session_id}
    if state is not None:
        values.update(
            group_id=state["group_id"],
            reduced_contents=_sql_json(state["reduced_contents"]),
            reduced_token_count=state["reduced_token_count"],
            reduced_event_id=state["reduced_event_id"],
        )
        await conn.execute(
            delete(BRANCH_ROWS).where(
                b.tenant == tenant,
                b.session_id == session_id,
                b.owner_session_id == owner,
                b.seq == seq,
            )
        )
    await conn.execute(
        update(MESSAGES)
        .where(MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == owner, MESSAGES.c.seq == seq)
        .values(**values)
    )
    reads = (lin.tenant == tenant, lin.session_id == session_id, lin.owner_session_id == owner)
    segments = (await read_lineage(conn, tenant, session_id)).segments
    after = next(a for o, a, _ in segments if o == owner)
    if seq - 1 <= after:  # it was the owner's only row the session read
        await conn.execute(delete(LINEAGE).where(*reads))
    else:
        await conn.execute(update(LINEAGE).where(*reads).values(through_seq=seq - 1))
    await bump_lineage(conn, tenant, [session_id])
    await collect(conn, tenant, {owner})
    return True


def _sql_json(value: Any) -> Any:
    """A JSON column's value as a statement sets it: None is SQL NULL, not JSON null."""
    return null() if value is None else value
