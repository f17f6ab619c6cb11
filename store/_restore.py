"""Restore and pin in SQL, with the rules of :mod:`store.memory._compaction`.

A restore loads the session's groups (a restore is an explicit, rare operation; the
chain of summaries it walks can reach any of them), runs the shared restore rules on
them, and writes back what changed with a ``restore`` event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from sqlalchemy import Table, update
from sqlalchemy.ext.asyncio import AsyncConnection

from store._audit import read_events
from store._mirror import before_totals, mirror_of, write_back
from store._mirror_load import load_groups, load_rows
from store._rows import chunks, lock_session, now
from store.audit_models import CompactionEvent
from store.errors import InvalidInput
from store.memory._compaction import Outcome, new_event_id, restore
from store.schema import GroupRow, MessageRow, SessionRow

__all__ = ["restore_groups", "set_pinned"]

GROUPS = cast(Table, GroupRow.__table__)
MESSAGES = cast(Table, MessageRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)


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
    mirror = mirror_of(session)
    await load_groups(conn, mirror)
    groups = mirror.session.groups
    out = Outcome(event_id=new_event_id(), now=now(), before=before_totals(session))
    if group_ids is not None:
        unknown = [g for g in group_ids if g not in groups]
        if unknown:
            raise InvalidInput(f"unknown group ids in session {session_id!r}: {unknown}")
        restore(mirror.session, out, group_ids=group_ids)
        params: dict[str, object] = {"group_ids": group_ids}
    else:
        found = await read_events(conn, tenant, session_id, event_id=event_id)
        if not found:
            raise InvalidInput(f"no event {event_id!r} in session {session_id!r}")
        event = found[0]
        await load_rows(conn, mirror, MESSAGES.c.reduced_event_id == event.id)
        targets = [g.group_id for g in groups.values() if g.excluded and g.event_id == event.id]
        restore(
            mirror.session,
            out,
            group_ids=targets,
            drop_summaries=list(event.summarized),
            drop_reductions_of=event.id,
        )
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
    mirror = mirror_of(await lock_session(conn, tenant, session_id))
    await load_groups(conn, mirror, ids)
    unknown = [g for g in ids if g not in mirror.session.groups]
    if unknown:
        raise InvalidInput(f"unknown group ids in session {session_id!r}: {unknown}")
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
