"""Writes that keep branches apart: no write to one branch changes what another reads.

A branch's state of a row another session stores lives in its own
``chatledger_branch_rows`` (:func:`set_own_state`). The session that stores a row keeps
its state in the row itself; before it changes a row that other branches read (its
group after a merge, its reduction), it copies the row's current state to each of them
that has none of its own yet (:func:`keep_for_readers`), so they go on reading what they
read. Only a session whose row says ``shared`` (a fork was made of it) pays for that
look. Operations that would change a shared row for one branch only are refused
(:func:`refuse_shared`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, null, select, type_coerce, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.rules.branching import shared_refusal, tail_refusal
from store.sql import dialect
from store.sql.branches.resealing import reseal_in_place, resealed
from store.sql.branches.rows import conversation, read_lineage
from store.sql.codec import ENCODED, sealing_now
from store.sql.schema import BRANCH_ROWS, LINEAGE, MESSAGES, SESSIONS

__all__ = [
    "bump_lineage",
    "holders_of",
    "inherited_state",
    "keep_for_readers",
    "move_inherited",
    "readers_of",
    "refuse_shared",
    "refuse_tail",
    "set_own_state",
]

_STATE = ("group_id", "reduced_contents", "reduced_token_count", "reduced_event_id")


async def bump_lineage(conn: AsyncConnection, tenant: str, session_ids: Sequence[str]) -> None:
    """The lineage of ``session_ids`` changed: a new revision (their cached views go)
    and lineage version (their cached lineage goes)."""
    if session_ids:
        s = SESSIONS.c
        await conn.execute(
            update(SESSIONS)
            .where(s.tenant == tenant, s.session_id.in_(sorted(set(session_ids))))
            .values(revision=s.revision + 1, lineage_version=s.lineage_version + 1)
        )


def refuse_tail(session: RowMapping) -> None:
    """Refuse a write to a superseded tail (or to rows kept for forks)."""
    if session["branch"] in ("tail", "kept"):
        raise tail_refusal(
            session["session_id"], session["parent_session_id"], session["branch_event_id"]
        )


async def keep_for_readers(
    conn: AsyncConnection, tenant: str, session: RowMapping, condition: Any
) -> None:
    """Before the session changes the state of its own rows that match ``condition`` (a
    condition on :data:`~store.sql.schema.MESSAGES`), copy that state to every branch
    that reads them and has none of its own: they keep reading what they read."""
    if not session["shared"]:
        return
    m, lin = MESSAGES.c, LINEAGE.c
    copied = select(
        m.tenant,
        lin.session_id,
        m.session_id,
        m.seq,
        *(m[name] for name in _STATE),
    ).select_from(
        MESSAGES.join(
            LINEAGE,
            and_(
                lin.tenant == m.tenant,
                lin.owner_session_id == m.session_id,
                m.seq <= lin.through_seq,
            ),
        )
    )
    copied = copied.where(m.tenant == tenant, m.session_id == session["session_id"], condition)
    insert = dialect.of(conn).insert(BRANCH_ROWS)
    names = ["tenant", "session_id", "owner_session_id", "seq", *_STATE]
    await conn.execute(insert.from_select(names, copied).on_conflict_do_nothing())
    if sealing_now() is not None:  # the copies are sealed for the branches that read them
        b = BRANCH_ROWS.c
        rows = select(m.seq).where(m.tenant == tenant, m.session_id == session["session_id"])
        kept = (b.owner_session_id == session["session_id"]) & b.seq.in_(rows.where(condition))
        await reseal_in_place(conn, tenant, BRANCH_ROWS, kept)


async def inherited_state(
    conn: AsyncConnection, tenant: str, session_id: str, groups: Sequence[str]
) -> dict[tuple[str, int], dict[str, Any]]:
    """The branch's state of its inherited rows that match ``where``, by
    ``(owner, seq)``: their group and reduction as it reads them now (the reduction as
    its encoded text)."""
    lineage = await read_lineage(conn, tenant, session_id)
    rows = conversation(tenant, lineage, groups=groups).subquery()
    query = select(rows).where(rows.c.owner_session_id != session_id)
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for row in (await conn.execute(query)).mappings():
        found[(row["owner_session_id"], int(row["seq"]))] = {name: row[name] for name in _STATE}
    return found


async def move_inherited(
    conn: AsyncConnection, tenant: str, session_id: str, absorbed: str, target: str
) -> None:
    """A merge in a fork: its inherited rows of group ``absorbed`` join ``target``."""
    current = await inherited_state(conn, tenant, session_id, [absorbed])
    await set_own_state(conn, tenant, session_id, current, {"group_id": target})


async def set_own_state(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    current: Mapping[tuple[str, int], Mapping[str, Any]],
    values: Mapping[str, Any],
) -> None:
    """Give the branch its own state of the inherited rows ``current`` (each row's state
    as the branch reads it, by ``(owner, seq)``): ``values`` over it. A reduction is
    given as its encoded text."""
    if not current:
        return
    insert = dialect.of(conn).insert(BRANCH_ROWS)
    for (owner, seq), now in current.items():
        state = {**now, **values}
        params = {
            "tenant": tenant,
            "session_id": session_id,
            "owner_session_id": owner,
            "seq": seq,
            **{name: state[name] for name in _STATE},
        }
        if params["reduced_contents"] is None:
            params["reduced_contents"] = null()  # SQL NULL, not JSON null
        else:  # sealed for the branch that reads it, whoever's sealing it was read from
            text = resealed(params["reduced_contents"], session_id, seq, "reduced_contents")
            params["reduced_contents"] = type_coerce(text, ENCODED)
        statement = insert.values(**params).on_conflict_do_update(
            index_elements=["tenant", "session_id", "owner_session_id", "seq"],
            set_={name: params[name] for name in _STATE},
        )
        await conn.execute(statement)


async def readers_of(
    conn: AsyncConnection, tenant: str, session_id: str, seq: int | None = None
) -> list[str]:
    """The branches that read the session's rows (``seq``: that row), by id."""
    lin = LINEAGE.c
    query = select(lin.session_id).where(lin.tenant == tenant, lin.owner_session_id == session_id)
    if seq is not None:
        query = query.where(lin.through_seq >= seq)
    b = BRANCH_ROWS.c
    members = select(b.session_id).where(
        b.tenant == tenant, b.owner_session_id == session_id, b.member
    )
    if seq is not None:
        members = members.where(b.seq == seq)
    found = {r[0] for r in await conn.execute(query)} | {r[0] for r in await conn.execute(members)}
    return sorted(found)


async def holders_of(conn: AsyncConnection, tenant: str, owner: str, seq: int) -> list[str]:
    """The branches that hold ``owner``'s row ``seq``: the owner (unless it only keeps
    rows for forks) and its readers, by id."""
    branch = (
        await conn.execute(
            select(SESSIONS.c.branch).where(
                SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == owner
            )
        )
    ).scalar_one_or_none()
    found = set(await readers_of(conn, tenant, owner, seq))
    if branch != "kept":
        found.add(owner)
    return sorted(found)


async def refuse_shared(
    conn: AsyncConnection,
    tenant: str,
    session: RowMapping,
    what: str,
    *,
    seq: int | None = None,
    message_id: str | None = None,
) -> None:
    """Refuse ``what`` when another branch holds the session's row ``seq`` (None: any of
    its rows), or when the session reads rows another session stores (``seq`` None)."""
    session_id = session["session_id"]
    if seq is None and session["branch"] is not None:
        parent = session["parent_session_id"] or "its parent"
        raise shared_refusal(what, session_id, None, parent)
    if not session["shared"]:
        return
    others = await readers_of(conn, tenant, session_id, seq)
    if others:
        raise shared_refusal(what, session_id, message_id, others[0])
