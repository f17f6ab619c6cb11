"""What a branch reads: its lineage, and its conversation's rows built from it.

A root reads its own rows, as it always has (the queries of :mod:`store.sql.history`
and :mod:`store.sql.projection`). A fork (``branch`` set on its session row) reads
three kinds of rows, in ``seq`` order:

* the rows of each session of its *lineage* (``chatledger_lineage``): that session's
  rows above the previous segment's ``through_seq`` up to its own (a fork's own rows
  start above every ``seq`` it inherits, so the segments never overlap);
* the *members* (``chatledger_branch_rows.member``): rows beyond a segment's end it
  holds all the same (a summary its parent stored after the cut);
* its own rows.

Of an inherited row it reads the immutable columns from the row, its group and its
reduction from its own ``chatledger_branch_rows`` entry when it has one (else from the
row: an owner that changes a row another branch reads first copies the old values to
that branch, :mod:`store.sql.branches.sharing`), and its exclusion from its own group.
:func:`conversation` builds that statement with the columns of
:func:`~store.sql.mapping.message_columns`, so the same mapping reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, Text, and_, case, func, or_, select, type_coerce, union_all
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ColumnElement, Select

from store.sql.mapping import COLUMNS
from store.sql.schema import BRANCH_ROWS, GROUPS, LINEAGE, MESSAGES

__all__ = [
    "Filter",
    "Lineage",
    "conversation",
    "read_lineage",
    "stored_hashes_of",
]


@dataclass(frozen=True, slots=True)
class Lineage:
    """The rows a session reads besides its own: ``(owner, after, through)`` segments,
    oldest first (the owner's rows with ``after < seq <= through``)."""

    session_id: str
    segments: tuple[tuple[str, int, int], ...] = ()

    @property
    def through(self) -> int:
        """The highest ``seq`` inherited (0 for a root)."""
        return self.segments[-1][2] if self.segments else 0

    def owner_of(self, seq: int) -> str:
        """The session whose row has ``seq`` in this conversation (a member excepted)."""
        for owner, after, through in self.segments:
            if after < seq <= through:
                return owner
        return self.session_id

    def cut(self, seq: int) -> tuple[tuple[str, int], ...]:
        """The ``(owner, through)`` pairs of a fork of this conversation after ``seq``:
        the segments up to it, and this session's own rows when ``seq`` is one."""
        pairs: list[tuple[str, int]] = []
        for owner, after, through in self.segments:
            if after < seq:
                pairs.append((owner, min(through, seq)))
        if seq > self.through:
            pairs.append((self.session_id, seq))
        return tuple(pairs)


async def read_lineage(conn: AsyncConnection, tenant: str, session_id: str) -> Lineage:
    """The session's lineage (empty for a root)."""
    query = (
        select(LINEAGE.c.owner_session_id, LINEAGE.c.through_seq)
        .where(LINEAGE.c.tenant == tenant, LINEAGE.c.session_id == session_id)
        .order_by(LINEAGE.c.through_seq)
    )
    segments: list[tuple[str, int, int]] = []
    after = 0
    for owner, through in await conn.execute(query):
        segments.append((owner, after, int(through)))
        after = int(through)
    return Lineage(session_id, tuple(segments))


Filter = Callable[[Mapping[str, ColumnElement[Any]]], Sequence[ColumnElement[bool]]]
"""Conditions on a branch of the conversation, given its effective columns by name
(``seq``, ``group_id``, ``excluded``, ``message_id``, ...)."""


def among(name: str, values: Sequence[Any]) -> Filter:
    """The filter: column ``name`` is one of ``values``."""

    def where(columns: Mapping[str, ColumnElement[Any]]) -> list[ColumnElement[bool]]:
        return [columns[name].in_(list(values))]

    return where


def _text(column: Any) -> Any:
    return sql_cast(column, Text)


def _raw(column: Any) -> Any:
    return type_coerce(column, String())


def _read(name: str, value: Any) -> Any:
    """``value`` read as :data:`~store.sql.mapping.COLUMNS` reads the column ``name``."""
    column = next(c for c in COLUMNS if c.name == name)
    if column.read.select == "text":
        return _text(value)
    if column.read.select == "raw":
        return _raw(value)
    return value


def _branch(
    tenant: str,
    session_id: str,
    kind: str,
    where: Filter | None,
    *,
    owner: str | None = None,
    after: int = 0,
    through: int = 0,
    extra: Sequence[ColumnElement[Any]] = (),
) -> Select[Any]:
    """One part of the conversation: a lineage segment (``kind="segment"``), the members
    (``"members"``) or the session's own rows (``"own"``)."""
    m = MESSAGES.alias("m")
    b = BRANCH_ROWS.alias("b")
    g = GROUPS.alias("g")
    if kind == "own":
        group_id: Any = m.c.group_id
        reduced: tuple[Any, ...] = (
            m.c.reduced_contents,
            m.c.reduced_token_count,
            m.c.reduced_event_id,
        )
        joined: Any = m
        conditions: list[ColumnElement[bool]] = [m.c.tenant == tenant, m.c.session_id == session_id]
    else:
        on_row = and_(
            b.c.tenant == m.c.tenant,
            b.c.session_id == session_id,
            b.c.owner_session_id == m.c.session_id,
            b.c.seq == m.c.seq,
        )
        if kind == "segment":
            joined = m.outerjoin(b, on_row)
            group_id = func.coalesce(b.c.group_id, m.c.group_id)
            unset = b.c.seq.is_(None)
            reduced = tuple(
                case((unset, getattr(m.c, name)), else_=getattr(b.c, name))
                for name in ("reduced_contents", "reduced_token_count", "reduced_event_id")
            )
            conditions = [
                m.c.tenant == tenant,
                m.c.session_id == owner,
                m.c.seq > after,
                m.c.seq <= through,
            ]
        else:
            joined = b.join(m, on_row)
            group_id = b.c.group_id
            reduced = (b.c.reduced_contents, b.c.reduced_token_count, b.c.reduced_event_id)
            conditions = [b.c.tenant == tenant, b.c.session_id == session_id, b.c.member]
    joined = joined.join(
        g, and_(g.c.tenant == tenant, g.c.session_id == session_id, g.c.group_id == group_id)
    )
    values: dict[str, Any] = {c.name: getattr(m.c, c.name) for c in COLUMNS}
    values.update(
        group_id=group_id,
        excluded=g.c.excluded,
        excluded_reason=g.c.excluded_reason,
        excluded_event_id=g.c.excluded_event_id,
        reduced_contents=reduced[0],
        reduced_token_count=reduced[1],
        reduced_event_id=reduced[2],
    )
    named: dict[str, ColumnElement[Any]] = {**values, "slot": m.c.slot, "owner": m.c.session_id}
    if where is not None:
        conditions.extend(where(named))
    columns = [_read(c.name, values[c.name]).label(c.name) for c in COLUMNS]
    columns.append(type_coerce(g.c.kind, String()).label("group_kind"))
    columns.append(m.c.session_id.label("owner_session_id"))
    return select(*columns, *extra).select_from(joined).where(*conditions)


def conversation(
    tenant: str,
    lineage: Lineage,
    where: Filter | None = None,
    *,
    extra: Sequence[ColumnElement[Any]] = (),
) -> Any:
    """The rows of ``lineage``'s session as one statement (a union of its parts), with
    the columns of :func:`~store.sql.mapping.message_columns`, then ``group_kind`` and
    ``owner_session_id``, then ``extra``; ``where`` filters each part. Unordered: order
    the union's subquery."""
    session_id = lineage.session_id
    parts = [
        _branch(
            tenant,
            session_id,
            "segment",
            where,
            owner=owner,
            after=after,
            through=through,
            extra=extra,
        )
        for owner, after, through in lineage.segments
    ]
    parts.append(_branch(tenant, session_id, "members", where, extra=extra))
    parts.append(_branch(tenant, session_id, "own", where, extra=extra))
    return union_all(*parts)


async def stored_hashes_of(
    conn: AsyncConnection, tenant: str, lineage: Lineage, message_ids: Sequence[str] | None
) -> dict[str, str]:
    """The content hash of each of ``message_ids`` (None: of every message) that
    ``lineage``'s session holds, inherited or its own (what an append to a fork
    deduplicates against, and what an import of it finds stored)."""
    m, b = MESSAGES.c, BRANCH_ROWS.c
    found: dict[str, str] = {}
    parts: list[list[str] | None] = [None]
    if message_ids is not None:
        parts = [
            list(message_ids[start : start + 500]) for start in range(0, len(message_ids), 500)
        ]
    for part in parts:
        places = [
            and_(m.session_id == owner, m.seq > after, m.seq <= through)
            for owner, after, through in lineage.segments
        ]
        places.append(m.session_id == lineage.session_id)
        members = select(b.owner_session_id, b.seq).where(
            b.tenant == tenant, b.session_id == lineage.session_id, b.member
        )
        for owner, seq in await conn.execute(members):
            places.append(and_(m.session_id == owner, m.seq == seq))
        query = select(m.message_id, m.content_hash).where(m.tenant == tenant, or_(*places))
        if part is not None:
            query = query.where(m.message_id.in_(part))
        found.update((row[0], row[1]) for row in await conn.execute(query))
    return found
