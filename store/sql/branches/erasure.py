"""Redaction across branches: a message is stored once, so its tombstone reaches every
branch that holds it, each with its own ``redact`` event, summaries and totals.

:func:`redact_in_branches` runs when the session asked is a fork or its rows are read
by forks (a root that shares nothing takes :func:`store.sql.upkeep.erasure.redact_messages`'s
own path). It finds the messages in the session's conversation, writes each tombstone
once (in the row of the session that stores it), then, for every branch holding one of
them (the storing session, the session asked, every fork reading the row), clears that
branch's reduction of it, redacts the branch's summaries that cover it, rebuilds the
branch's totals (a new revision) and records the branch's event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import and_, func, null, or_, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import InvalidInput
from store.models import RedactReport
from store.rules.changes import new_event_id
from store.rules.checks import check_tokenizer
from store.rules.erasure import covering_summaries, tombstone
from store.rules.identity import is_tombstone
from store.sql import dialect
from store.sql.audit import record_event
from store.sql.branches.rows import among, conversation, read_lineage
from store.sql.branches.sharing import readers_of
from store.sql.mapping import COLUMN_INDEX, page_mapper
from store.sql.schema import BRANCH_ROWS, GROUPS, SESSIONS
from store.sql.sessions import lock_session, read_session
from store.sql.upkeep import erasure
from store.sql.upkeep.recount import rebuild_totals, write_totals

__all__ = ["rebuild_branch_totals", "rebuild_session_totals", "redact_in_branches"]

_SEQ = COLUMN_INDEX["seq"]
_GROUP = COLUMN_INDEX["group_id"]
_WIDTH = len(COLUMN_INDEX)


async def _conversation_rows(
    conn: AsyncConnection, tenant: str, session_id: str, name: str, values: Sequence[str]
) -> list[Sequence[Any]]:
    lineage = await read_lineage(conn, tenant, session_id)
    if name == "group_id":  # by the group indexes
        rows = conversation(tenant, lineage, groups=list(values)).subquery()
    elif name == "message_id":
        rows = conversation(tenant, lineage, message_ids=list(values)).subquery()
    else:
        rows = conversation(tenant, lineage, among(name, list(values))).subquery()
    return list((await conn.execute(select(rows).order_by(rows.c.seq))).all())


async def rebuild_branch_totals(conn: AsyncConnection, tenant: str, session_id: str) -> None:
    """:func:`~store.sql.upkeep.recount.rebuild_totals` for a fork: the groups' and the
    session's totals from its whole conversation, and a new revision."""
    lineage = await read_lineage(conn, tenant, session_id)
    rows = conversation(tenant, lineage).subquery()
    effective = func.coalesce(rows.c.reduced_token_count, rows.c.token_count)
    per_group = select(rows.c.group_id, func.count(), func.coalesce(func.sum(effective), 0))
    g = GROUPS.c
    for group_id, count, tokens in await conn.execute(per_group.group_by(rows.c.group_id)):
        await conn.execute(
            update(GROUPS)
            .where(g.tenant == tenant, g.session_id == session_id, g.group_id == group_id)
            .values(message_count=int(count), token_count=int(tokens))
        )
    stored = select(func.count(), func.coalesce(func.sum(rows.c.token_count), 0))
    stored_messages, stored_tokens = (await conn.execute(stored)).one()
    await write_totals(
        conn,
        tenant,
        session_id,
        stored_messages=int(stored_messages),
        stored_tokens=int(stored_tokens),
    )


async def rebuild_session_totals(conn: AsyncConnection, tenant: str, session: RowMapping) -> None:
    """Rebuild the totals of the session whose row is ``session``: a root's from its
    rows, a branch's from its whole conversation."""
    if session["branch"] is None:
        await rebuild_totals(conn, tenant, session["session_id"])
    else:
        await rebuild_branch_totals(conn, tenant, session["session_id"])


async def _holders(
    conn: AsyncConnection, tenant: str, asked: str, places: Sequence[tuple[str, int]]
) -> list[str]:
    """Every branch holding one of the rows ``places``: the one asked first."""
    found: set[str] = set()
    for owner, seq in places:
        found.add(owner)
        found.update(await readers_of(conn, tenant, owner, seq))
    rows = (
        await conn.execute(
            select(SESSIONS.c.session_id, SESSIONS.c.branch).where(
                SESSIONS.c.tenant == tenant, SESSIONS.c.session_id.in_(sorted(found))
            )
        )
    ).all()
    live = {r[0] for r in rows if r[1] != "kept"}
    return [asked, *sorted(live - {asked})]


async def redact_in_branches(conn: AsyncConnection, r: erasure.Redaction) -> RedactReport:
    """Redact ``r``'s messages in every branch that holds them (see the module)."""
    asked: RowMapping = await lock_session(conn, r.tenant, r.session_id)
    check_tokenizer(asked["tokenizer"], r.tokenizer, r.session_id)
    rows = await _conversation_rows(conn, r.tenant, r.session_id, "message_id", r.message_ids)
    found = {row[COLUMN_INDEX["message_id"]] for row in rows}
    unknown = [m for m in r.message_ids if m not in found]
    if unknown:
        raise InvalidInput(f"unknown message ids in session {r.session_id!r}: {unknown}")
    await erasure.erase_step(conn)
    mapped = page_mapper(r.tenant, r.session_id)
    places: list[tuple[str, int]] = []
    redacted: list[str] = []
    for row in rows:
        owner, seq = str(row[-1]), int(row[_SEQ])
        places.append((owner, seq))
        stored = mapped(row[: _WIDTH + 1])
        if is_tombstone(stored.message):
            continue
        grave = tombstone(stored.message, reason=r.reason, event_id=r.event_id, summary=False)
        await erasure.write_tombstone(conn, replace(r, session_id=owner), seq, grave)
        redacted.append(stored.message_id)
    holders = await _holders(conn, r.tenant, r.session_id, places)
    report: RedactReport | None = None
    for holder in holders:
        session = asked if holder == r.session_id else await lock_session(conn, r.tenant, holder)
        event_id = r.event_id if holder == r.session_id else new_event_id()
        request = replace(r, session_id=holder, event_id=event_id)
        one = await _in_branch(conn, request, session, places, redacted)
        if holder == r.session_id:
            report = one
    assert report is not None
    return report


async def _in_branch(
    conn: AsyncConnection,
    r: erasure.Redaction,
    session: RowMapping,
    places: Sequence[tuple[str, int]],
    redacted: list[str],
) -> RedactReport:
    """One branch's part: its reductions of the rows, its covering summaries, its
    totals and its event."""
    b = BRANCH_ROWS.c
    held = [and_(b.owner_session_id == owner, b.seq == seq) for owner, seq in places]
    cleared_rows = (
        await conn.execute(
            select(b.owner_session_id, b.seq).where(
                b.tenant == r.tenant,
                b.session_id == r.session_id,
                b.reduced_event_id.is_not(None),
                or_(*held),
            )
        )
    ).all()
    cleared: list[str] = []
    if cleared_rows:
        await conn.execute(
            update(BRANCH_ROWS)
            .where(b.tenant == r.tenant, b.session_id == r.session_id, or_(*held))
            .values(reduced_contents=null(), reduced_token_count=None, reduced_event_id=None)
        )
    mine = await _conversation_rows(conn, r.tenant, r.session_id, "message_id", r.message_ids)
    wanted = set(places)
    here = [row for row in mine if (str(row[-1]), int(row[_SEQ])) in wanted]
    was_reduced = {(str(o), int(q)) for o, q in cleared_rows}
    cleared = sorted(
        row[COLUMN_INDEX["message_id"]]
        for row in here
        if (str(row[-1]), int(row[_SEQ])) in was_reduced
    )
    groups = {row[_GROUP] for row in here}
    summaries_of = {
        row[0]: list(row[1] or ())
        for row in await conn.execute(
            select(GROUPS.c.group_id, GROUPS.c.summary_of).where(
                GROUPS.c.tenant == r.tenant,
                GROUPS.c.session_id == r.session_id,
                GROUPS.c.kind == "summary",
            )
        )
    }
    covering = covering_summaries(summaries_of, groups)
    summaries: list[str] = []
    if covering:
        summary_rows = await _conversation_rows(
            conn, r.tenant, r.session_id, "group_id", sorted(covering)
        )
        mapped = page_mapper(r.tenant, r.session_id)
        for row in summary_rows:
            stored = mapped(row[: _WIDTH + 1])
            if is_tombstone(stored.message):
                continue
            grave = tombstone(stored.message, reason=r.reason, event_id=r.event_id, summary=True)
            owner = replace(r, session_id=str(row[-1]))
            await erasure.write_tombstone(conn, owner, stored.seq, grave)
            summaries.append(stored.message_id)
    ids = sorted(row[COLUMN_INDEX["message_id"]] for row in here)
    mine_redacted = [m for m in redacted if m in ids]
    copies = await erasure.scrub_copies(conn, r.tenant, r.session_id, ids, r.event_id)
    await rebuild_session_totals(conn, r.tenant, session)
    params: dict[str, Any] = {
        "reason": r.reason,
        "message_ids": mine_redacted,
        "summaries": summaries,
        "reductions_cleared": cleared,
    }
    if copies:
        params["quarantine_copies"] = copies
    if dialect.of(conn).wal_checkpoint:
        params[erasure.FILE_ERASED_KEY] = False
    event = await record_event(
        conn,
        r.tenant,
        r.session_id,
        session,
        event_id=r.event_id,
        strategy="redact",
        params=params,
        now=r.now,
    )
    after = await read_session(conn, r.tenant, r.session_id)
    return RedactReport(
        session_id=r.session_id,
        tenant=r.tenant,
        reason=r.reason,
        redacted=tuple(mine_redacted),
        summaries=tuple(summaries),
        reductions_cleared=tuple(cleared),
        tokens_before=session["stored_tokens"],
        tokens_after=after["stored_tokens"],
        event=event,
    )
