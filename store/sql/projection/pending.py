"""In-flight messages in a projection: a run's pending messages added to a view.

:func:`with_pending` annotates the messages of the current run that are not stored yet
after the stored ones, exactly as an append would (a pending result joins its stored
call, absorbing pending groups it answers), without writing anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.sql.annotation import load_state
from store.sql.projection.views import SqlSource
from strategies.groups import GroupInfo, annotate, in_call_order
from strategies.messages import Message
from strategies.view import GroupLinks, GroupView, MessageSource, View

__all__ = ["with_pending"]

Counter = Callable[[Message], int]


@dataclass(frozen=True)
class _PendingSource:
    """Stored messages plus in-flight ones, with groups merged as an append would."""

    base: SqlSource
    extra: Mapping[str, list[tuple[int, Message]]]
    absorbed: Mapping[str, list[str]]

    def links(self, group_id: str) -> GroupLinks | None:
        """The stored group's links, for a group without in-flight messages."""
        if group_id in self.extra or group_id in self.absorbed:
            return None
        return self.base.links(group_id)

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
            out[gid] = [m for _, m in in_call_order(pairs, lambda p: p[1])]
        return out


@dataclass
class _Pending:
    """Group views being rebuilt with pending messages."""

    groups: dict[str, GroupView]
    extra: dict[str, list[tuple[int, Message]]] = field(default_factory=dict)
    absorbed: dict[str, list[str]] = field(default_factory=dict)


async def with_pending(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    session: RowMapping,
    view: View,
    fresh: Sequence[Message],
    count: Counter,
) -> View:
    """``view`` with ``fresh`` (not stored) messages annotated after the stored ones."""
    if not fresh:
        return view
    loaded = await load_state(conn, tenant, session_id, session, fresh)
    annotation = annotate(fresh, loaded.state, frozen=loaded.frozen)
    work = _Pending(groups={g.group_id: g for g in view.groups})
    base_seq = session["next_seq"]
    stored_groups = loaded.groups
    hidden = {gid for gid, row in stored_groups.items() if row["excluded"]}
    for gid, info in annotation.groups.items():
        if gid in hidden:
            continue
        _update(work, gid, info, base_seq + info.first_position - session["position"])
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
