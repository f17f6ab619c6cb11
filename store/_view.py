"""Views from SQL: the active groups of a session, their messages loaded by group id.

:func:`read_view` reads the active groups through the ``(tenant, session_id, excluded,
anchor, slot)`` index, so a view costs O(active groups); :class:`SqlSource` loads the
messages of the groups a strategy asks for (reductions applied), by group id.
:func:`with_pending` adds the in-flight messages of a run to a view without storing
them: they are annotated after the stored ones, exactly as an append would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store._append import AppendContext, load_state
from store._read import COLUMN_INDEX, message_columns, row_message
from store._rows import chunks
from store.schema import GroupRow, MessageRow, SessionRow
from strategies.groups import GroupInfo, annotate
from strategies.messages import Message
from strategies.view import GroupView, MessageSource, Totals, View

__all__ = ["SqlSource", "active_group_rows", "group_view", "read_view", "with_pending"]

MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)
SESSIONS = cast(Table, SessionRow.__table__)

Counter = Callable[[Message], int]
_SEQ = COLUMN_INDEX["seq"]
_GROUP = COLUMN_INDEX["group_id"]


def group_view(row: Mapping[Any, Any]) -> GroupView:
    """The strategies' view of one group row."""
    summary_of = row["summary_of"]
    return GroupView(
        group_id=row["group_id"],
        kind=row["kind"],
        turn=row["turn"],
        anchor=row["anchor"],
        slot=row["slot"],
        message_count=row["message_count"],
        token_count=row["token_count"],
        pinned=row["pinned"],
        has_reasoning=row["has_reasoning"],
        pending_calls=row["pending_calls"],
        orphan=row["orphan"],
        summary_of=tuple(summary_of or ()),
    )


async def active_group_rows(
    conn: AsyncConnection, tenant: str, session_id: str
) -> list[RowMapping]:
    """The session's active group rows in projection order."""
    query = (
        select(GROUPS)
        .where(
            GROUPS.c.tenant == tenant,
            GROUPS.c.session_id == session_id,
            GROUPS.c.excluded.is_(False),
        )
        .order_by(GROUPS.c.anchor, GROUPS.c.slot)
    )
    return list((await conn.execute(query)).mappings().all())


async def excluded_totals(conn: AsyncConnection, tenant: str, session_id: str) -> Totals:
    """Messages, groups and tokens of the excluded groups, from the session's aggregates.

    The aggregates are kept current on every write, so this is one primary-key read
    however much of the history is excluded.
    """
    query = select(
        SESSIONS.c.stored_messages - SESSIONS.c.active_messages,
        SESSIONS.c.stored_groups - SESSIONS.c.active_groups,
        SESSIONS.c.stored_tokens - SESSIONS.c.active_tokens,
    ).where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
    row = (await conn.execute(query)).one_or_none()
    if row is None:
        return Totals()
    messages, groups, tokens = row
    return Totals(messages=int(messages), groups=int(groups), tokens=int(tokens))


@dataclass(frozen=True)
class SqlSource:
    """Loads groups' messages from SQL by group id, reductions applied."""

    engine: AsyncEngine
    tenant: str
    session_id: str

    async def load_rows(self, group_ids: Sequence[str]) -> dict[str, list[tuple[int, Message]]]:
        """Each group's ``(seq, message)`` pairs in ``seq`` order."""
        out: dict[str, list[tuple[int, Message]]] = {gid: [] for gid in group_ids}
        async with self.engine.connect() as conn:
            for part in chunks(sorted(set(group_ids))):
                query = (
                    select(*message_columns())
                    .where(
                        MESSAGES.c.tenant == self.tenant,
                        MESSAGES.c.session_id == self.session_id,
                        MESSAGES.c.group_id.in_(part),
                    )
                    .order_by(MESSAGES.c.group_id, MESSAGES.c.seq)
                )
                for row in (await conn.execute(query)).all():
                    shown = row_message(row, tenant=self.tenant, session_id=self.session_id)
                    out[row[_GROUP]].append((row[_SEQ], shown))
        return out

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        """The messages of each group (reductions applied)."""
        rows = await self.load_rows(group_ids)
        return {gid: [m for _, m in rows[gid]] for gid in group_ids}


async def read_view(
    conn: AsyncConnection, source: SqlSource, **kwargs: Any
) -> tuple[View, list[RowMapping]]:
    """The active view of ``source``'s session and the group rows it was built from."""
    rows = await active_group_rows(conn, source.tenant, source.session_id)
    excluded = await excluded_totals(conn, source.tenant, source.session_id)
    view = View(
        groups=tuple(group_view(r) for r in rows), source=source, excluded=excluded, **kwargs
    )
    return view, rows


@dataclass(frozen=True)
class _PendingSource:
    """Stored messages plus in-flight ones, with groups merged as an append would."""

    base: SqlSource
    extra: Mapping[str, list[tuple[int, Message]]]
    absorbed: Mapping[str, list[str]]

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        wanted = [*group_ids, *(a for g in group_ids for a in self.absorbed.get(g, ()))]
        stored = await self.base.load_rows(wanted)
        out: dict[str, list[Message]] = {}
        for gid in group_ids:
            pairs = list(stored.get(gid, []))
            for absorbed in self.absorbed.get(gid, ()):
                pairs.extend(stored.get(absorbed, []))
            pairs.extend(self.extra.get(gid, []))
            pairs.sort(key=lambda p: p[0])
            out[gid] = [m for _, m in pairs]
        return out


@dataclass
class _Pending:
    """Group views being rebuilt with pending messages."""

    groups: dict[str, GroupView]
    extra: dict[str, list[tuple[int, Message]]] = field(default_factory=dict)
    absorbed: dict[str, list[str]] = field(default_factory=dict)


async def with_pending(
    conn: AsyncConnection,
    ctx: AppendContext,
    session: RowMapping,
    view: View,
    fresh: Sequence[Message],
    count: Counter,
) -> View:
    """``view`` with ``fresh`` (not stored) messages annotated after the stored ones."""
    if not fresh:
        return view
    loaded = await load_state(conn, ctx, session, fresh)
    annotation = annotate(fresh, loaded.state)
    work = _Pending(groups={g.group_id: g for g in view.groups})
    base_seq = session["next_seq"]
    stored_groups = loaded.groups
    for absorbed, target in annotation.merged.items():
        row = stored_groups.get(absorbed)
        work.groups.pop(absorbed, None)
        if row is None or target not in work.groups:
            continue
        work.absorbed.setdefault(target, []).append(absorbed)
        g = work.groups[target]
        work.groups[target] = replace(
            g,
            message_count=g.message_count + row["message_count"],
            token_count=g.token_count + row["token_count"],
            pinned=g.pinned or row["pinned"],
        )
    hidden = {gid for gid, row in stored_groups.items() if row["excluded"]}
    for gid, info in annotation.groups.items():
        if gid in hidden:
            continue
        _update(work, gid, info, base_seq + info.first_position - session["position"])
    for index, (message, (_, gid)) in enumerate(zip(fresh, annotation.message_groups, strict=True)):
        if gid in hidden or gid not in work.groups:
            continue
        g = work.groups[gid]
        work.groups[gid] = replace(
            g, message_count=g.message_count + 1, token_count=g.token_count + count(message)
        )
        work.extra.setdefault(gid, []).append((base_seq + index, message))
    groups = sorted(work.groups.values(), key=lambda g: g.order_key)
    source: MessageSource = _PendingSource(cast(SqlSource, view.source), work.extra, work.absorbed)
    return replace(view, groups=tuple(groups), source=source)


def _update(work: _Pending, gid: str, info: GroupInfo, anchor: int) -> None:
    existing = work.groups.get(gid)
    if existing is None:
        work.groups[gid] = GroupView(
            group_id=gid,
            kind=info.kind,
            turn=info.turn,
            anchor=anchor,
            message_count=0,
            token_count=0,
            has_reasoning=info.has_reasoning,
            pending_calls=info.pending_calls,
            orphan=info.orphan,
        )
        return
    work.groups[gid] = replace(
        existing,
        kind=info.kind,
        turn=info.turn,
        has_reasoning=info.has_reasoning,
        pending_calls=info.pending_calls,
        orphan=info.orphan,
    )
