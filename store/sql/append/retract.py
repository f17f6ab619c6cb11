"""Taking back the newest appended message of a session, in the caller's write transaction.

The plan is the shared rule (:mod:`store.rules.retract`): the session's appended
messages are read (a retraction re-annotates them: O(history)), the rule says what the
message's group and the session's annotation become without the last one, and this
module deletes its row and writes the group, the unanswered calls and the results
waiting for their call, the session row and the ``retract`` audit event.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, delete, insert, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.models import CompactionEvent, StoredMessage
from store.rules.branching import shared_refusal
from store.rules.changes import Outcome, build_event, log_event, new_event_id
from store.rules.records import now
from store.rules.retract import RETRACT_STRATEGY, Retraction, check_retractable, plan_retraction
from store.sql.append.writer import SESSION_ADDED, SESSION_VALUES
from store.sql.audit import write_event
from store.sql.branches.deleting import adopt
from store.sql.branches.rows import read_lineage
from store.sql.branches.sharing import holders_of, refuse_shared, refuse_tail
from store.sql.compaction.mirror import before_totals, mirror_of
from store.sql.history import branch_rows, group_kinds
from store.sql.mapping import COLUMN_INDEX, message_columns, page_mapper, stored_message
from store.sql.schema import EARLY_RESULTS, GROUPS, MESSAGES, OPEN_CALLS
from store.sql.sessions import lock_session
from store.sql.statements import chunks, key_params, session_update
from strategies.groups import AnnotationState
from strategies.view import Totals

__all__ = ["retract_last"]

_GROUP = COLUMN_INDEX["group_id"]
_SLOT = COLUMN_INDEX["slot"]

_WRITE_SESSION = session_update(SESSION_VALUES, SESSION_ADDED, counters=("event_count",))


def _keys(table: Table, tenant: str, session_id: str) -> tuple[Any, Any]:
    return (table.c.tenant == tenant, table.c.session_id == session_id)


async def _appended(
    conn: AsyncConnection, tenant: str, session_id: str, session: RowMapping
) -> list[StoredMessage]:
    if session["branch"] is not None:  # a fork's conversation, inherited rows included
        lineage = await read_lineage(conn, tenant, session_id)
        found = await branch_rows(
            conn, tenant, lineage, include_excluded=True, limit=None, before=None, after=None
        )
        mapped = page_mapper(tenant, session_id)
        return [mapped(row) for row in found if row[_SLOT] == 0]
    query = (
        select(*message_columns())
        .where(*_keys(MESSAGES, tenant, session_id), MESSAGES.c.slot == 0)
        .order_by(MESSAGES.c.seq)
    )
    rows = (await conn.execute(query)).all()
    kinds = await group_kinds(conn, tenant, session_id, {row[_GROUP] for row in rows})
    return [
        stored_message(row, kinds.get(row[_GROUP]), tenant=tenant, session_id=session_id)
        for row in rows
    ]


async def _write_group(
    conn: AsyncConnection, tenant: str, session_id: str, plan: Retraction, tokens: int
) -> None:
    where = (*_keys(GROUPS, tenant, session_id), GROUPS.c.group_id == plan.group_id)
    if plan.group is None:
        await conn.execute(delete(GROUPS).where(*where))
        return
    info = plan.group
    await conn.execute(
        update(GROUPS)
        .where(*where)
        .values(
            message_count=GROUPS.c.message_count - 1,
            token_count=GROUPS.c.token_count - tokens,
            kind=info.kind,
            has_reasoning=info.has_reasoning,
            pending_calls=info.pending_calls,
            orphan=info.orphan,
        )
    )


async def _write_calls(
    conn: AsyncConnection, tenant: str, session_id: str, state: AnnotationState
) -> None:
    """Replace the session's unanswered calls and waiting early results by the state's."""
    base = {"tenant": tenant, "session_id": session_id}
    calls: list[dict[str, Any]] = [
        {**base, "call_id": call_id, "group_id": group_id, "ambiguous": False}
        for call_id, group_id in sorted(state.open_calls.items())
    ]
    calls.extend(
        {**base, "call_id": call_id, "group_id": None, "ambiguous": True}
        for call_id in sorted(state.ambiguous_calls)
    )
    early = [
        {**base, "call_id": call_id, "group_id": group_id}
        for call_id, group_id in sorted(state.early_results.items())
    ]
    for table, rows in ((OPEN_CALLS, calls), (EARLY_RESULTS, early)):
        await conn.execute(delete(table).where(*_keys(table, tenant, session_id)))
        for part in chunks(rows):
            await conn.execute(insert(table), list(part))


async def retract_last(
    conn: AsyncConnection, tenant: str, session_id: str
) -> tuple[StoredMessage, CompactionEvent] | None:
    """Delete the session's newest appended message and write its audit event (see
    :meth:`store.contract.HistoryBackend.retract_last`); None when there is none."""
    session = await lock_session(conn, tenant, session_id)
    refuse_tail(session)
    appended = await _appended(conn, tenant, session_id, session)
    if not appended:
        return None
    last = appended[-1]
    if session["branch"] is not None:
        lineage = await read_lineage(conn, tenant, session_id)
        if last.seq <= lineage.through:  # inherited: only a row no other branch holds
            owner = lineage.owner_of(last.seq)
            if not await adopt(conn, tenant, session_id, owner, last.seq):
                others = await holders_of(conn, tenant, owner, last.seq)
                other = next((h for h in others if h != session_id), owner)
                raise shared_refusal(
                    "retract the last message of", session_id, last.message_id, other
                )
    await refuse_shared(
        conn,
        tenant,
        session,
        "retract the last message of",
        seq=last.seq,
        message_id=last.message_id,
    )
    check_retractable(
        session_id,
        last.message_id,
        excluded=last.excluded,
        reason=last.excluded_reason,
        reduced=last.reduced_event_id is not None,
    )
    messages, groups = [m.message for m in appended], [m.group_id for m in appended]
    plan = plan_retraction(session_id, messages, groups)
    await conn.execute(
        delete(MESSAGES).where(*_keys(MESSAGES, tenant, session_id), MESSAGES.c.seq == last.seq)
    )
    await _write_group(conn, tenant, session_id, plan, last.token_count)
    await _write_calls(conn, tenant, session_id, plan.state)
    stamp = now()
    gone = 1 if plan.group is None else 0
    tail = plan.state.tail
    next_seq = last.seq if last.seq == session["next_seq"] - 1 else session["next_seq"]
    await conn.execute(
        _WRITE_SESSION,
        {
            **key_params(tenant, session_id),
            "v_next_seq": next_seq,
            "v_position": plan.state.position,
            "v_turn": plan.state.turn,
            "v_tail_group_id": tail.group.group_id if tail else None,
            "v_tail_mode": tail.mode if tail else None,
            "v_updated_at": stamp,
            "d_stored_messages": -1,
            "d_stored_tokens": -last.token_count,
            "d_stored_groups": -gone,
            "d_active_messages": -1,
            "d_active_tokens": -last.token_count,
            "d_active_groups": -gone,
        },
    )
    before = before_totals(session)
    tokens = last.token_count
    after = Totals(before.messages - 1, before.groups - gone, before.tokens - tokens)
    out = Outcome(event_id=new_event_id(), now=stamp, before=before)
    record = mirror_of(session).session
    params = plan.params(last.seq, last.role)
    event = build_event(
        record, out, after, phase="manual", strategy=RETRACT_STRATEGY, params=params
    )
    await write_event(
        conn,
        record.tenant,
        record.session_id,
        event,
        number=session["event_count"] + 1,
        revision=session["revision"] + 1,
    )
    log_event(event)
    return last, event
