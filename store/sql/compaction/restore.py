"""Restore and pin in SQL, with the shared rules of :mod:`store.rules.changes`.

A restore loads the session's groups (a restore is an explicit, rare operation; the
chain of summaries it walks can reach any of them), runs the shared restore rules on
them, and writes back what changed with a ``restore`` event.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import InvalidInput
from store.models import CompactionEvent
from store.rules.changes import (
    Outcome,
    check_groups,
    check_restorable,
    new_event_id,
    restore,
    undo_event,
)
from store.rules.records import now
from store.sql.audit import read_events
from store.sql.branches.rewind import restore_rewind
from store.sql.branches.rows import among
from store.sql.branches.sharing import refuse_tail
from store.sql.compaction.mirror import before_totals, load_groups, load_rows, mirror_of
from store.sql.compaction.write_back import write_back
from store.sql.schema import GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import lock_session
from store.sql.statements import chunks

__all__ = ["restore_groups", "set_pinned"]


async def restore_groups(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    *,
    group_ids: list[str] | None,
    event_id: str | None,
) -> CompactionEvent | None:
    """Re-include ``group_ids`` or undo ``event_id``, in the caller's write transaction."""
    session = await lock_session(conn, tenant, session_id)
    refuse_tail(session)
    mirror = mirror_of(session)
    await load_groups(conn, mirror)
    out = Outcome(event_id=new_event_id(), now=now(), before=before_totals(session))
    if group_ids is not None:
        check_groups(mirror.session, group_ids)
        restore(mirror.session, out, group_ids=group_ids)
        params: dict[str, object] = {"group_ids": group_ids}
    else:
        found = await read_events(conn, tenant, session_id, event_id=event_id)
        if not found:
            raise InvalidInput(f"no event {event_id!r} in session {session_id!r}")
        event = found[0]
        if event.phase in ("rewind", "restore") and "tail_session_id" in event.params:
            if event.params["tail_session_id"] is None:
                raise InvalidInput(f"event {event.id!r} set nothing aside: nothing to restore")
            return await restore_rewind(conn, tenant, session_id, event, now=now())
        check_restorable(event)
        await load_rows(
            conn,
            mirror,
            MESSAGES.c.reduced_event_id == event.id,
            in_branch=among("reduced_event_id", [event.id]),
        )
        undo_event(mirror.session, out, event)
        params = {"event_id": event.id}
    if not out.changed:
        return None
    return await write_back(
        conn, mirror, out, phase="restore", strategy="restore", params=dict(params)
    )


async def set_pinned(
    conn: AsyncConnection, tenant: str, session_id: str, group_ids: Iterable[str], *, pinned: bool
) -> list[str]:
    """Pin or unpin groups; return the ids that changed."""
    ids = list(dict.fromkeys(group_ids))
    locked = await lock_session(conn, tenant, session_id)
    refuse_tail(locked)
    mirror = mirror_of(locked)
    await load_groups(conn, mirror, ids)
    check_groups(mirror.session, ids)
    changed = [g for g in ids if mirror.session.groups[g].pinned != pinned]
    keys = (GROUPS.c.tenant == tenant, GROUPS.c.session_id == session_id)
    for part in chunks(changed):
        await conn.execute(
            update(GROUPS).where(*keys, GROUPS.c.group_id.in_(part)).values(pinned=pinned)
        )
    if changed:
        await conn.execute(
            update(SESSIONS)
            .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
            .values(revision=SESSIONS.c.revision + 1, updated_at=now())
        )
    return changed
