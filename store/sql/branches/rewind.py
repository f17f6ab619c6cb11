"""Rewind in SQL: the messages after the cut move under a superseded tail, and the
session becomes what a fork at the cut would be; restoring the rewind swaps them back.

:func:`rewind_session` first makes the tail a fork of the session at its last message
(a snapshot of its groups and state, no row copied), then moves the session's rows after
the cut under the tail's id (so that their ids and sequence numbers are free again in
the session), points every branch that read them to the tail, and cuts the session's
own groups, calls, waiting results and branch rows down to the prefix.
:func:`restore_rewind` sets what the session holds after the cut aside the same way,
then moves the tail's rows, groups and state back into the session.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, exists, func, insert, literal, not_, null, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import InvalidInput
from store.models import CompactionEvent
from store.rules.branching import REWIND_STRATEGY, new_tail_id
from store.rules.changes import new_event_id
from store.sql import dialect
from store.sql.audit import record_event
from store.sql.branches.deleting import keep_rows
from store.sql.branches.erasure import rebuild_session_totals
from store.sql.branches.fork import Cut, carried_summaries, fork_session, resolve_cut, shape_groups
from store.sql.branches.resealing import reseal_in_place
from store.sql.branches.rows import conversation, read_lineage
from store.sql.branches.sharing import bump_lineage, readers_of, refuse_tail
from store.sql.mapping import COLUMN_INDEX
from store.sql.schema import (
    BRANCH_ROWS,
    EARLY_RESULTS,
    EVENT_GROUPS,
    EVENTS,
    GROUPS,
    LINEAGE,
    MESSAGES,
    OPEN_CALLS,
    SESSIONS,
)
from store.sql.sessions import lock_session, read_session

__all__ = ["restore_rewind", "rewind_session"]

_SEQ = COLUMN_INDEX["seq"]
_SLOT = COLUMN_INDEX["slot"]
_GROUP = COLUMN_INDEX["group_id"]
_ROLE = COLUMN_INDEX["role"]


def _keys(table: Any, tenant: str, session_id: str) -> tuple[Any, Any]:
    return (table.c.tenant == tenant, table.c.session_id == session_id)


async def _set_aside(
    conn: AsyncConnection,
    tenant: str,
    session: RowMapping,
    cut: Cut,
    *,
    to: str | None,
    event_id: str,
    now: datetime,
) -> tuple[str, int]:
    """Make the tail (a snapshot of the session) and move the session's rows after the
    cut under it; the tail's id and the messages it took."""
    session_id = session["session_id"]
    tail_id = new_tail_id()
    end = await resolve_cut(conn, tenant, session, None, verb="rewind", tails=False)
    await fork_session(conn, tenant, session, end, tail_id, event_id=new_event_id(), now=now)
    # a tail's audit is its session's: the snapshot's own fork event goes
    await conn.execute(delete(EVENT_GROUPS).where(*_keys(EVENT_GROUPS, tenant, tail_id)))
    await conn.execute(delete(EVENTS).where(*_keys(EVENTS, tenant, tail_id)))
    await conn.execute(
        update(SESSIONS)
        .where(*_keys(SESSIONS, tenant, tail_id))
        .values(
            event_count=0,
            branch="tail",
            parent_session_id=session_id,
            fork_message_id=to,
            branch_event_id=event_id,
        )
    )
    seq = cut.seq
    await conn.execute(
        update(MESSAGES)
        .where(*_keys(MESSAGES, tenant, session_id), MESSAGES.c.seq > seq)
        .values(session_id=tail_id)
    )
    await reseal_in_place(conn, tenant, MESSAGES, MESSAGES.c.session_id == tail_id)
    await _follow(conn, tenant, session_id, tail_id, seq)
    b = BRANCH_ROWS.c  # the tail's own rows are no members of it
    await conn.execute(
        delete(BRANCH_ROWS).where(
            *_keys(BRANCH_ROWS, tenant, tail_id), b.owner_session_id == tail_id
        )
    )
    return tail_id, sum(1 for r in cut.after if r[_SLOT] == 0)


async def _follow(conn: AsyncConnection, tenant: str, owner: str, holder: str, seq: int) -> None:
    """Every branch that read ``owner``'s rows above ``seq`` reads them under ``holder``
    now (its lineage split at ``seq``, its branch rows and members renamed)."""
    lin = LINEAGE.c
    readers = (
        await conn.execute(
            select(lin.session_id, lin.through_seq).where(
                lin.tenant == tenant, lin.owner_session_id == owner, lin.through_seq > seq
            )
        )
    ).all()
    for reader, through in readers:
        before = (await read_lineage(conn, tenant, reader)).segments
        after = next(a for o, a, _ in before if o == owner)
        owner_row = (*_keys(LINEAGE, tenant, reader), lin.owner_session_id == owner)
        if seq <= after:  # none of the owner's rows it reads stay with the owner
            await conn.execute(delete(LINEAGE).where(*owner_row))
        else:
            await conn.execute(update(LINEAGE).where(*owner_row).values(through_seq=seq))
        await _bump(conn, tenant, reader)
        if reader == holder:
            continue
        await conn.execute(
            insert(LINEAGE).values(
                tenant=tenant, session_id=reader, owner_session_id=holder, through_seq=through
            )
        )
    b = BRANCH_ROWS.c
    await conn.execute(
        update(BRANCH_ROWS)
        .where(b.tenant == tenant, b.owner_session_id == owner, b.seq > seq)
        .values(owner_session_id=holder)
    )
    await conn.execute(update(SESSIONS).where(*_keys(SESSIONS, tenant, holder)).values(shared=True))


async def _bump(conn: AsyncConnection, tenant: str, session_id: str) -> None:
    """A branch's lineage changed: a new revision (its cached views go) and lineage
    version (its cached lineage goes)."""
    await bump_lineage(conn, tenant, [session_id])


async def _cut_down(conn: AsyncConnection, tenant: str, session: RowMapping, cut: Cut) -> None:
    """Leave the session what a fork at ``cut`` would hold (its rows after the cut are
    gone already)."""
    session_id = session["session_id"]
    seq = cut.seq
    kept, dropped = await carried_summaries(conn, tenant, cut)
    g = GROUPS.c
    prefix = and_(g.first_seq <= seq, g.kind != "summary") | g.group_id.in_(kept or [""])
    await conn.execute(delete(GROUPS).where(*_keys(GROUPS, tenant, session_id), not_(prefix)))
    await shape_groups(conn, tenant, session_id, cut, dropped)
    remaining = select(g.group_id).where(*_keys(GROUPS, tenant, session_id))
    for table in (OPEN_CALLS, EARLY_RESULTS):
        await conn.execute(
            delete(table).where(
                *_keys(table, tenant, session_id),
                table.c.group_id.is_not(None),
                table.c.group_id.not_in(remaining),
            )
        )
    # the session's own rows of groups active again: their exclusion mirrored
    if dropped:
        await conn.execute(
            update(MESSAGES)
            .where(
                *_keys(MESSAGES, tenant, session_id),
                MESSAGES.c.group_id.in_(
                    select(g.group_id).where(
                        *_keys(GROUPS, tenant, session_id), g.excluded.is_(False)
                    )
                ),
            )
            .values(excluded=False, excluded_reason=None, excluded_event_id=None)
        )
    # a fork cut inside what it inherits: its lineage and branch rows shrink
    pairs = dict(cut.lineage.cut(seq)) if seq else {}
    lin, b = LINEAGE.c, BRANCH_ROWS.c
    for owner, _, through in cut.lineage.segments:
        if owner not in pairs:
            await conn.execute(
                delete(LINEAGE).where(
                    *_keys(LINEAGE, tenant, session_id), lin.owner_session_id == owner
                )
            )
            await conn.execute(
                delete(BRANCH_ROWS).where(
                    *_keys(BRANCH_ROWS, tenant, session_id), b.owner_session_id == owner
                )
            )
        elif pairs[owner] < through:
            await conn.execute(
                update(LINEAGE)
                .where(*_keys(LINEAGE, tenant, session_id), lin.owner_session_id == owner)
                .values(through_seq=pairs[owner])
            )
            await conn.execute(
                delete(BRANCH_ROWS).where(
                    *_keys(BRANCH_ROWS, tenant, session_id),
                    b.owner_session_id == owner,
                    b.seq > pairs[owner],
                    b.member.is_(False),
                )
            )
    await conn.execute(
        delete(BRANCH_ROWS).where(
            *_keys(BRANCH_ROWS, tenant, session_id),
            b.member.is_(True),
            b.group_id.not_in(kept or [""]),
        )
    )
    await _bump(conn, tenant, session_id)


def _state_after(session: RowMapping, cut: Cut) -> dict[str, Any]:
    """The session row's annotation state at the cut."""
    appended_after = [r for r in cut.after if r[_SLOT] == 0]
    tail = cut.tail
    return {
        "position": int(session["position"]) - len(appended_after),
        "turn": int(session["turn"]) - sum(1 for r in appended_after if r[_ROLE] == "user"),
        "tail_group_id": None if tail is None else tail.group.group_id,
        "tail_mode": None if tail is None else tail.mode,
    }


async def _rebuild(conn: AsyncConnection, tenant: str, session_id: str) -> None:
    await rebuild_session_totals(conn, tenant, await read_session(conn, tenant, session_id))


async def _rewind_to(
    conn: AsyncConnection,
    tenant: str,
    session: RowMapping,
    cut: Cut,
    *,
    to: str | None,
    event_id: str,
    now: datetime,
) -> tuple[str, int]:
    """The rewind's writes, without its event: the tail's id and the messages it took."""
    state = _state_after(session, cut)
    kept, _ = await carried_summaries(conn, tenant, cut)
    session_id = session["session_id"]
    members = {
        (str(r[-1]), int(r[_SEQ]), str(r[_GROUP]))
        for r in cut.after
        if r[_SLOT] != 0 and r[_GROUP] in kept
    }
    tail_id, taken = await _set_aside(conn, tenant, session, cut, to=to, event_id=event_id, now=now)
    await _cut_down(conn, tenant, session, cut)
    if members:  # summaries the session keeps, stored after the cut: under the tail now
        insert_member = dialect.of(conn).insert(BRANCH_ROWS)
        for owner, seq, group_id in sorted(members):
            await conn.execute(
                insert_member.values(
                    tenant=tenant,
                    session_id=session_id,
                    owner_session_id=tail_id if owner == session_id else owner,
                    seq=seq,
                    group_id=group_id,
                    member=True,
                ).on_conflict_do_nothing()
            )
    state = {**state, **await _top(conn, tenant, session["session_id"], cut.seq)}
    await conn.execute(
        update(SESSIONS)
        .where(*_keys(SESSIONS, tenant, session["session_id"]))
        .values(**state, updated_at=now)
    )
    await _rebuild(conn, tenant, session["session_id"])
    return tail_id, taken


async def _top(conn: AsyncConnection, tenant: str, session_id: str, seq: int) -> dict[str, Any]:
    """The next ``seq`` once the rows after ``seq`` are gone."""
    top = seq
    b = BRANCH_ROWS.c
    members = select(b.seq).where(*_keys(BRANCH_ROWS, tenant, session_id), b.member)
    own = select(MESSAGES.c.seq).where(*_keys(MESSAGES, tenant, session_id))
    for query in (members, own):
        top = max([top, *(int(r[0]) for r in await conn.execute(query))])
    return {"next_seq": top + 1}


async def rewind_session(
    conn: AsyncConnection, tenant: str, session_id: str, to: str | None, *, now: datetime
) -> CompactionEvent | None:
    """Rewind the session to after ``to`` (None: to its start); None when nothing
    comes after it."""
    session = await lock_session(conn, tenant, session_id)
    refuse_tail(session)
    cut = await resolve_cut(conn, tenant, session, to, verb="rewind", tails=False, start=True)
    if cut.at_end:
        return None
    event_id = new_event_id()
    tail_id, taken = await _rewind_to(conn, tenant, session, cut, to=to, event_id=event_id, now=now)
    params = {"to": to, "tail_session_id": tail_id, "messages": taken}
    return await record_event(
        conn,
        tenant,
        session_id,
        session,
        event_id=event_id,
        strategy=REWIND_STRATEGY,
        params=params,
        now=now,
        phase="rewind",
    )


async def restore_rewind(
    conn: AsyncConnection, tenant: str, session_id: str, event: CompactionEvent, *, now: datetime
) -> CompactionEvent:
    """Bring back the tail the rewind ``event`` set aside (see the module)."""
    session = await lock_session(conn, tenant, session_id)
    tail_id = str(event.params.get("tail_session_id"))
    tail = (
        (
            await conn.execute(
                select(SESSIONS).where(
                    *_keys(SESSIONS, tenant, tail_id),
                    SESSIONS.c.branch == "tail",
                    SESSIONS.c.parent_session_id == session_id,
                )
            )
        )
        .mappings()
        .first()
    )
    if tail is None:
        raise InvalidInput(
            f"cannot restore rewind {event.id!r} of session {session_id!r}: its tail "
            f"{tail_id!r} was restored or deleted"
        )
    to = tail["fork_message_id"]
    event_id = new_event_id()
    common = await _common_prefix(conn, tenant, session_id, tail_id)
    cut = await resolve_cut(conn, tenant, session, common, verb="restore", tails=False, start=True)
    new_tail: str | None = None
    if not cut.at_end:  # what the session holds beyond the tail goes aside in its turn
        new_tail, _ = await _rewind_to(
            conn, tenant, session, cut, to=to, event_id=event_id, now=now
        )
    else:  # summaries it made since: the tail's state replaces its own
        await _drop_own_after(conn, tenant, session_id, cut.seq)
    await _take_back(conn, tenant, session_id, tail, cut.seq)
    params = {"event_id": event.id, "tail_session_id": new_tail}
    return await record_event(
        conn,
        tenant,
        session_id,
        session,
        event_id=event_id,
        strategy="restore",
        params=params,
        now=now,
        phase="restore",
    )


async def _appended_places(
    conn: AsyncConnection, tenant: str, session_id: str
) -> list[tuple[str, int, str]]:
    """The appended rows of the session's conversation, in order: (owner, seq, id)."""
    lineage = await read_lineage(conn, tenant, session_id)
    rows = conversation(tenant, lineage, lambda c: [c["slot"] == 0]).subquery()
    query = select(rows.c.owner_session_id, rows.c.seq, rows.c.message_id).order_by(rows.c.seq)
    return [(str(o), int(q), str(m)) for o, q, m in await conn.execute(query)]


async def _common_prefix(
    conn: AsyncConnection, tenant: str, session_id: str, tail_id: str
) -> str | None:
    """The last appended message the session and its tail both hold, in the same place
    (None: they share none)."""
    mine = await _appended_places(conn, tenant, session_id)
    theirs = await _appended_places(conn, tenant, tail_id)
    last: str | None = None
    for here, there in zip(mine, theirs, strict=False):
        if here[:2] != there[:2]:
            break
        last = here[2]
    return last


async def _drop_own_after(conn: AsyncConnection, tenant: str, session_id: str, seq: int) -> None:
    """Remove the session's own rows after ``seq`` (summaries only: no appended message
    follows the cut), keeping those another branch reads under a kept session."""
    m = MESSAGES.c
    after = (m.tenant == tenant, m.session_id == session_id, m.seq > seq)
    if await readers_of(conn, tenant, session_id):
        holder = await keep_rows(conn, tenant, session_id, and_(*after), whole=False)
        if holder is not None:
            return
    await conn.execute(delete(MESSAGES).where(*after))


async def _take_back(
    conn: AsyncConnection, tenant: str, session_id: str, tail: RowMapping, seq: int
) -> None:
    """Move the tail's rows, groups, calls, branch rows and state into the session."""
    tail_id = tail["session_id"]
    await conn.execute(
        update(MESSAGES).where(*_keys(MESSAGES, tenant, tail_id)).values(session_id=session_id)
    )
    await reseal_in_place(conn, tenant, MESSAGES, MESSAGES.c.session_id == session_id)
    lin, b = LINEAGE.c, BRANCH_ROWS.c
    readers = (
        await conn.execute(
            select(lin.session_id, lin.through_seq).where(
                lin.tenant == tenant, lin.owner_session_id == tail_id
            )
        )
    ).all()
    await conn.execute(
        update(BRANCH_ROWS)
        .where(b.tenant == tenant, b.owner_session_id == tail_id)
        .values(owner_session_id=session_id)
    )
    # the session's state is the tail's
    for table in (GROUPS, OPEN_CALLS, EARLY_RESULTS):
        await conn.execute(delete(table).where(*_keys(table, tenant, session_id)))
        columns = [c for c in table.c if c.key not in ("tenant", "session_id")]
        await conn.execute(
            insert(table).from_select(
                ["tenant", "session_id", *(c.key for c in columns)],
                select(literal(tenant), literal(session_id), *columns).where(
                    *_keys(table, tenant, tail_id)
                ),
            )
        )
    # the tail's own state of the session's rows goes into the rows themselves
    overlays = (
        (
            await conn.execute(
                select(BRANCH_ROWS).where(
                    *_keys(BRANCH_ROWS, tenant, tail_id), b.owner_session_id == session_id
                )
            )
        )
        .mappings()
        .all()
    )
    for row in overlays:
        await conn.execute(
            update(MESSAGES)
            .where(*_keys(MESSAGES, tenant, session_id), MESSAGES.c.seq == row["seq"])
            .values(
                group_id=row["group_id"],
                reduced_contents=_sql_json(row["reduced_contents"]),
                reduced_token_count=row["reduced_token_count"],
                reduced_event_id=row["reduced_event_id"],
            )
        )
    overlaid = [int(row["seq"]) for row in overlays]
    if overlaid:
        mine = (MESSAGES.c.session_id == session_id) & MESSAGES.c.seq.in_(overlaid)
        await reseal_in_place(conn, tenant, MESSAGES, mine)
    await conn.execute(delete(BRANCH_ROWS).where(*_keys(BRANCH_ROWS, tenant, session_id)))
    copied = [c for c in BRANCH_ROWS.c if c.key not in ("tenant", "session_id")]
    await conn.execute(
        insert(BRANCH_ROWS).from_select(
            ["tenant", "session_id", *(c.key for c in copied)],
            select(literal(tenant), literal(session_id), *copied).where(
                *_keys(BRANCH_ROWS, tenant, tail_id), b.owner_session_id != session_id
            ),
        )
    )
    await reseal_in_place(conn, tenant, BRANCH_ROWS, b.session_id == session_id)
    await conn.execute(delete(LINEAGE).where(*_keys(LINEAGE, tenant, session_id)))
    copied_lineage = [c for c in LINEAGE.c if c.key not in ("tenant", "session_id")]
    await conn.execute(
        insert(LINEAGE).from_select(
            ["tenant", "session_id", *(c.key for c in copied_lineage)],
            select(literal(tenant), literal(session_id), *copied_lineage).where(
                *_keys(LINEAGE, tenant, tail_id), lin.owner_session_id != session_id
            ),
        )
    )
    # the exclusion of the session's own rows, from its groups now
    g = GROUPS.c
    m = MESSAGES.c
    same = and_(g.tenant == m.tenant, g.session_id == m.session_id, g.group_id == m.group_id)
    grouped = and_(*_keys(MESSAGES, tenant, session_id), exists().where(same))
    await conn.execute(
        update(MESSAGES)
        .where(grouped)
        .values(
            excluded=select(g.excluded).where(same).scalar_subquery(),
            excluded_reason=select(g.excluded_reason).where(same).scalar_subquery(),
            excluded_event_id=select(g.excluded_event_id).where(same).scalar_subquery(),
        )
    )
    await _keep_prefix(conn, tenant, session_id)
    reads = (await read_lineage(conn, tenant, session_id)).segments
    current = await read_session(conn, tenant, session_id)
    if reads and current["branch"] is None:  # it reads rows it no longer stores itself
        await conn.execute(
            update(SESSIONS).where(*_keys(SESSIONS, tenant, session_id)).values(branch="fork")
        )
    await conn.execute(
        update(SESSIONS)
        .where(*_keys(SESSIONS, tenant, session_id))
        .values(
            next_seq=tail["next_seq"],
            position=tail["position"],
            turn=tail["turn"],
            tail_group_id=tail["tail_group_id"],
            tail_mode=tail["tail_mode"],
        )
    )
    await conn.execute(delete(SESSIONS).where(*_keys(SESSIONS, tenant, tail_id)))
    await _bump(conn, tenant, session_id)
    # readers of the tail's rows read the session's conversation as far as they did,
    # then what they read after it
    lineage = await read_lineage(conn, tenant, session_id)
    for reader, through in readers:
        if reader == session_id:  # its lineage is the tail's now
            continue
        segments = (await read_lineage(conn, tenant, reader)).segments
        later = [(owner, upto) for owner, after, upto in segments if after >= through]
        await conn.execute(delete(LINEAGE).where(*_keys(LINEAGE, tenant, reader)))
        for owner, upto in (*lineage.cut(int(through)), *later):
            await conn.execute(
                insert(LINEAGE).values(
                    tenant=tenant, session_id=reader, owner_session_id=owner, through_seq=upto
                )
            )
        await _bump(conn, tenant, reader)
    await _rebuild(conn, tenant, session_id)


async def _keep_prefix(conn: AsyncConnection, tenant: str, session_id: str) -> None:
    """After a restore the session may store rows below rows it reads (its prefix up to
    the cut, then another tail's rows the restored one read): those rows move under a
    kept session that the session, and every branch that read them, reads instead."""
    lineage = await read_lineage(conn, tenant, session_id)
    m, lin = MESSAGES.c, LINEAGE.c
    low = and_(*_keys(MESSAGES, tenant, session_id), m.seq <= lineage.through)
    top = (await conn.execute(select(func.max(m.seq)).where(low))).scalar()
    if top is None:
        return
    held = await keep_rows(conn, tenant, session_id, low, whole=False)
    assert held is not None
    holder = held[0]
    readers = select(lin.session_id).where(
        lin.tenant == tenant, lin.owner_session_id == session_id, lin.through_seq <= top
    )
    await bump_lineage(conn, tenant, [str(r[0]) for r in await conn.execute(readers)])
    await conn.execute(
        update(LINEAGE)
        .where(lin.tenant == tenant, lin.owner_session_id == session_id, lin.through_seq <= top)
        .values(owner_session_id=holder)
    )
    await conn.execute(
        insert(LINEAGE).values(
            tenant=tenant, session_id=session_id, owner_session_id=holder, through_seq=int(top)
        )
    )


def _sql_json(value: Any) -> Any:
    """A JSON column's value as a statement sets it: None is SQL NULL, not JSON null."""
    return null() if value is None else value
