"""Model calls' usage in SQL: a call written (:func:`record_call`) and read back
(:func:`read_calls`, :func:`paired_points`), one row of ``chatledger_usage`` each.

A call is written in one transaction of two statements: one read of what the row
depends on (whether its ``call_id`` is recorded already, the session's newest call
``seq`` and newest paired context, its newest stored message), then the insert. Two
writers of one session may read the same newest ``seq``; the second insert then fails
on the key and the caller runs the transaction again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store.rules.records import now
from store.sql.schema import SESSIONS, USAGE
from store.sql.statements import chunks
from store.usage.ledger import PreviousContext, Sent, UsageEntry
from store.usage.models import Usage, UsageCall

__all__ = ["paired_points", "read_calls", "record_call", "record_calls"]

_LANES = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def _of(tenant: str, session_id: str) -> Any:
    return (USAGE.c.tenant == tenant) & (USAGE.c.session_id == session_id)


async def record_call(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    usage: Usage,
    *,
    message_id: str | None,
    call_id: str | None,
    sent: Sent | None,
) -> bool:
    """Write the call; False, writing nothing, when ``call_id`` is recorded already."""
    mine = _of(tenant, session_id)
    newest_paired = (
        select(USAGE.c.context_messages, USAGE.c.context_digest)
        .where(mine, USAGE.c.context_messages.is_not(None))
        .order_by(USAGE.c.seq.desc())
        .limit(1)
        .subquery()
    )
    duplicate = (
        select(literal(1)).where(mine, USAGE.c.call_id == call_id).exists()
        if call_id is not None
        else literal(False)
    )
    facts = select(
        duplicate.label("duplicate"),
        select(func.max(USAGE.c.seq)).where(mine).scalar_subquery().label("last"),
        select(SESSIONS.c.next_seq)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
        .scalar_subquery()
        .label("next_seq"),
        select(newest_paired.c.context_messages).scalar_subquery().label("messages"),
        select(newest_paired.c.context_digest).scalar_subquery().label("digest"),
    )
    row = (await conn.execute(facts)).one()
    if row.duplicate:
        return False
    previous = (
        None if row.messages is None else PreviousContext(int(row.messages), str(row.digest or ""))
    )
    newest = None if row.next_seq is None or row.next_seq <= 1 else int(row.next_seq) - 1
    entry = UsageEntry.of(
        session_id,
        int(row.last or 0) + 1,
        usage,
        call_id=call_id,
        message_id=message_id,
        after_seq=newest,
        sent=sent,
        previous=previous,
        recorded_at=now(),
    )
    call = entry.call
    await conn.execute(
        insert(USAGE).values(
            tenant=tenant,
            session_id=session_id,
            seq=call.seq,
            call_id=call.call_id,
            message_id=call.message_id,
            after_seq=call.after_seq,
            model=usage.model,
            exact=usage.exact,
            called_at=usage.at,
            recorded_at=call.recorded_at,
            local_tokens=call.local_tokens,
            context_messages=None if entry.context is None else entry.context.messages,
            context_digest=None if entry.context is None else entry.context.digest,
            prefix_kept=call.prefix_kept,
            **{lane: getattr(usage, lane) for lane in _LANES},
        )
    )
    return True


async def record_calls(
    conn: AsyncConnection,
    tenant: str,
    calls: Sequence[tuple[str, Usage, str | None, str | None]],
) -> int:
    """Write many unpaired calls: the recorded call ids, newest ``seq`` and newest
    stored message of their sessions read once (a chunk of sessions a statement), then
    one insert of every call whose ``call_id`` is not recorded for its session (nor
    earlier in ``calls``). Returns the calls written."""
    sessions = sorted({session_id for session_id, _, _, _ in calls})
    known: dict[str, set[str]] = {s: set() for s in sessions}
    last: dict[str, int] = dict.fromkeys(sessions, 0)
    newest: dict[str, int | None] = dict.fromkeys(sessions)
    for part in chunks(sessions):
        ours = (USAGE.c.tenant == tenant) & USAGE.c.session_id.in_(part)
        found = select(USAGE.c.session_id, USAGE.c.seq, USAGE.c.call_id).where(ours)
        for row in await conn.execute(found):
            last[row.session_id] = max(last[row.session_id], int(row.seq))
            if row.call_id is not None:
                known[row.session_id].add(row.call_id)
        held = select(SESSIONS.c.session_id, SESSIONS.c.next_seq).where(
            SESSIONS.c.tenant == tenant, SESSIONS.c.session_id.in_(part)
        )
        for session_id, next_seq in await conn.execute(held):
            newest[session_id] = None if next_seq is None or next_seq <= 1 else next_seq - 1
    rows: list[dict[str, Any]] = []
    recorded_at = now()
    for session_id, usage, message_id, call_id in calls:
        if call_id is not None:
            if call_id in known[session_id]:
                continue
            known[session_id].add(call_id)
        last[session_id] += 1
        rows.append(
            {
                "tenant": tenant,
                "session_id": session_id,
                "seq": last[session_id],
                "call_id": call_id,
                "message_id": message_id,
                "after_seq": newest[session_id],
                "model": usage.model,
                "exact": usage.exact,
                "called_at": usage.at,
                "recorded_at": recorded_at,
                "local_tokens": None,
                "context_messages": None,
                "context_digest": None,
                "prefix_kept": None,
                **{lane: getattr(usage, lane) for lane in _LANES},
            }
        )
    if rows:
        await conn.execute(insert(USAGE), rows)
    return len(rows)


def _call_of(row: Row[Any, Any]) -> UsageCall:
    """One way from a row to a call."""
    usage = Usage(
        model=row.model,
        exact=bool(row.exact),
        at=row.called_at,
        **{lane: getattr(row, lane) for lane in _LANES},
    )
    return UsageCall(
        session_id=row.session_id,
        seq=row.seq,
        call_id=row.call_id,
        message_id=row.message_id,
        after_seq=row.after_seq,
        usage=usage,
        local_tokens=row.local_tokens,
        prefix_kept=row.prefix_kept,
        recorded_at=row.recorded_at,
    )


_CALL_COLUMNS = (
    USAGE.c.session_id,
    USAGE.c.seq,
    USAGE.c.call_id,
    USAGE.c.message_id,
    USAGE.c.after_seq,
    USAGE.c.model,
    USAGE.c.exact,
    USAGE.c.called_at,
    USAGE.c.recorded_at,
    USAGE.c.local_tokens,
    USAGE.c.prefix_kept,
    *(USAGE.c[lane] for lane in _LANES),
)


async def read_calls(
    conn: AsyncConnection, tenant: str, session_id: str | None, *, since: datetime | None
) -> list[UsageCall]:
    """The calls of the session (or of the tenant, by session), from ``since``, in
    the order they were recorded."""
    query = select(*_CALL_COLUMNS).where(USAGE.c.tenant == tenant)
    if session_id is not None:
        query = query.where(USAGE.c.session_id == session_id)
    if since is not None:
        query = query.where(USAGE.c.called_at >= since)
    query = query.order_by(USAGE.c.session_id, USAGE.c.seq)
    return [_call_of(row) for row in await conn.execute(query)]


async def paired_points(
    conn: AsyncConnection, tenant: str, session_id: str, *, model: str | None, limit: int
) -> tuple[str | None, list[tuple[int, int]]]:
    """The model (``model``, or that of the newest paired call reporting input) and the
    ``(local, input)`` counts of its newest ``limit`` such calls, oldest first."""
    paired = (
        _of(tenant, session_id)
        & USAGE.c.local_tokens.is_not(None)
        & USAGE.c.input_tokens.is_not(None)
    )
    if model is None:
        newest = select(USAGE.c.model).where(paired).order_by(USAGE.c.seq.desc()).limit(1)
        found = (await conn.execute(newest)).first()
        if found is None:
            return None, []
        model = found.model
    chosen = USAGE.c.model.is_(None) if model is None else USAGE.c.model == model
    query = (
        select(USAGE.c.local_tokens, USAGE.c.input_tokens)
        .where(paired, chosen)
        .order_by(USAGE.c.seq.desc())
        .limit(limit)
    )
    rows = (await conn.execute(query)).all()
    return model, [(int(r.local_tokens), int(r.input_tokens)) for r in reversed(rows)]
