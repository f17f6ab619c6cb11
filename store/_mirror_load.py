"""Loading a :class:`~store._mirror.Mirror`: the few groups and message rows a change
set or restore can touch, read in the caller's write transaction."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store._bound import among_params, key_params, select_among
from store._mirror import Mirror
from store.memory._state import GroupRow as MemGroup
from store.memory._state import MessageRow as MemRow
from store.schema import GroupRow, MessageRow
from strategies.messages import Message

__all__ = ["load_groups", "load_rows", "load_rows_by_id"]

MESSAGES = cast(Table, MessageRow.__table__)
GROUPS = cast(Table, GroupRow.__table__)

_PLACEHOLDER_ROLE = "user"
"""The role of the placeholder message a loaded row carries (contents are never read)."""


def _keys(table: Table, mirror: Mirror) -> tuple[Any, Any]:
    s = mirror.session
    return (table.c.tenant == s.tenant, table.c.session_id == s.session_id)


def _add_group(mirror: Mirror, row: RowMapping) -> None:
    mirror.loaded[row["group_id"]] = row
    group = MemGroup(
        group_id=row["group_id"],
        kind=row["kind"],
        turn=row["turn"],
        anchor=row["anchor"],
        slot=row["slot"],
        created_at=row["created_at"],
        has_reasoning=row["has_reasoning"],
        pending_calls=row["pending_calls"],
        orphan=row["orphan"],
        pinned=row["pinned"],
        excluded=row["excluded"],
        reason=row["excluded_reason"],
        event_id=row["excluded_event_id"],
        summarized_by=row["summarized_by"],
        summary_of=tuple(row["summary_of"] or ()),
    )
    mirror.session.groups[group.group_id] = group
    mirror.original[group.group_id] = replace(group)
    mirror.counts[group.group_id] = (row["message_count"], row["token_count"])


async def load_groups(
    conn: AsyncConnection,
    mirror: Mirror,
    group_ids: Iterable[str] | None = None,
    *,
    anchors: Iterable[int] = (),
) -> None:
    """Load groups by id (every group of the session when None), and those at ``anchors``."""
    s = mirror.session
    if group_ids is None:
        query = select(GROUPS).where(*_keys(GROUPS, mirror))
        for row in (await conn.execute(query)).mappings():
            _add_group(mirror, row)
        return
    keys = key_params(s.tenant, s.session_id)
    reads: list[tuple[Any, list[Any]]] = [
        (select_among(conn, "groups", "group_id"), list(set(group_ids) - set(s.groups))),
        (select_among(conn, "groups", "anchor", "any_exclusion"), list(set(anchors))),
    ]
    for query, wanted in reads:
        for params in among_params(conn, keys, wanted):
            for row in (await conn.execute(query, params)).mappings():
                if row["group_id"] not in s.groups:
                    _add_group(mirror, row)


_ROW_NAMES = (
    "message_id",
    "seq",
    "anchor",
    "slot",
    "group_id",
    "token_count",
    "stored_at",
    "reduced_token_count",
    "reduced_event_id",
    "source_id",
)
_ROW_COLUMNS = select(*(MESSAGES.c[name] for name in _ROW_NAMES))


async def load_rows_by_id(conn: AsyncConnection, mirror: Mirror, ids: Collection[str]) -> None:
    """Load the message rows with the given ids (see :func:`load_rows`)."""
    query = select_among(conn, "messages", "message_id", columns=_ROW_NAMES)
    found: list[RowMapping] = []
    keys = key_params(mirror.session.tenant, mirror.session.session_id)
    for params in among_params(conn, keys, list(ids)):
        found.extend((await conn.execute(query, params)).mappings())
    _add_rows(mirror, found)


async def load_rows(conn: AsyncConnection, mirror: Mirror, condition: Any) -> None:
    """Load the message rows matching ``condition`` (contents left out: never rewritten)."""
    query = _ROW_COLUMNS.where(*_keys(MESSAGES, mirror), condition)
    _add_rows(mirror, (await conn.execute(query)).mappings())


def _add_rows(mirror: Mirror, found: Iterable[RowMapping]) -> None:
    # Sorted here, not in SQL: with ``message_id IN (...)`` an ORDER BY seq makes SQLite
    # walk the session's whole primary key to avoid a sort (O(history) per compaction).
    rows = sorted(found, key=lambda r: int(r["seq"]))
    for row in rows:
        placeholder = Message(role=_PLACEHOLDER_ROLE, contents=[], message_id=row["message_id"])
        mem = MemRow(
            message=placeholder,
            seq=row["seq"],
            anchor=row["anchor"],
            slot=row["slot"],
            group_id=row["group_id"],
            tokens=row["token_count"],
            stored_at=row["stored_at"],
            digest="",
            reduced=placeholder if row["reduced_event_id"] is not None else None,
            reduced_tokens=row["reduced_token_count"],
            reduced_event=row["reduced_event_id"],
            source_id=row["source_id"],
        )
        mirror.session.rows[row["message_id"]] = mem
        mirror.original_rows[row["message_id"]] = replace(mem)
