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

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    String,
    Text,
    and_,
    bindparam,
    case,
    func,
    select,
    type_coerce,
    union_all,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ColumnElement, Select

from store.sql.codec import sealing_now
from store.sql.mapping import COLUMNS
from store.sql.schema import BRANCH_ROWS, GROUPS, LINEAGE, MESSAGES, SESSIONS

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


_READ_LINEAGE = (
    select(LINEAGE.c.owner_session_id, LINEAGE.c.through_seq)
    .where(LINEAGE.c.tenant == bindparam("tenant"), LINEAGE.c.session_id == bindparam("session_id"))
    .order_by(LINEAGE.c.through_seq)
)


async def read_lineage(conn: AsyncConnection, tenant: str, session_id: str) -> Lineage:
    """The session's lineage (empty for a root)."""
    params = {"tenant": tenant, "session_id": session_id}
    segments: list[tuple[str, int, int]] = []
    after = 0
    for owner, through in await conn.execute(_READ_LINEAGE, params):
        segments.append((owner, after, int(through)))
        after = int(through)
    return _noted(Lineage(session_id, tuple(segments)))


def _noted(lineage: Lineage) -> Lineage:
    """``lineage``, which the running call's sealing now knows: the fork reads rows its
    lineage sealed (:meth:`~store.encryption.sealing.Sealing.note_lineage`)."""
    sealing = sealing_now()
    if sealing is not None and lineage.segments:
        owners = frozenset(owner for owner, _, _ in lineage.segments)
        sealing.note_lineage(lineage.session_id, owners)
    return lineage


_KNOWN: dict[tuple[str, str, str, int], Lineage] = {}
"""Lineages read, by (tenant, session, incarnation, lineage version): a fork's lineage
changes only with its version, so a turn reads it once per process."""
_KNOWN_MAX = 4096


async def lineage_of(conn: AsyncConnection, tenant: str, session: Mapping[Any, Any]) -> Lineage:
    """The lineage of the session whose row is ``session`` (read when this process has
    not read it at the row's incarnation and lineage version)."""
    session_id = str(session["session_id"])
    if session["branch"] is None:
        return Lineage(session_id)
    incarnation = session["incarnation"]
    if incarnation is None:
        return await read_lineage(conn, tenant, session_id)
    key = (tenant, session_id, str(incarnation), int(session["lineage_version"]))
    found = _KNOWN.get(key)
    if found is None:
        found = await read_lineage(conn, tenant, session_id)
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()
        _KNOWN[key] = found
    return _noted(found)


Filter = Callable[[Mapping[str, ColumnElement[Any]]], Sequence[ColumnElement[bool]]]
"""Conditions on a branch of the conversation, given its effective columns by name
(``seq``, ``group_id``, ``excluded``, ``message_id``, ...)."""


def among(name: str, values: Sequence[Any]) -> Filter:
    """The filter: column ``name`` is one of ``values``."""

    def where(columns: Mapping[str, ColumnElement[Any]]) -> list[ColumnElement[bool]]:
        return [columns[name].in_(list(values))]

    return where


_M = MESSAGES.alias("m")
_B = BRANCH_ROWS.alias("b")
_G = GROUPS.alias("g")
"""The aliases every part of a conversation reads through (each part is its own
``SELECT``, so they repeat without clashing); made once, as their columns are."""


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
    tenant: Any,
    session_id: Any,
    kind: str,
    where: Filter | None,
    *,
    owner: Any = None,
    after: Any = 0,
    through: Any = 0,
    extra: Sequence[ColumnElement[Any]] = (),
    groups: Any = None,
    message_ids: Sequence[str] | None = None,
) -> Select[Any]:
    """One part of the conversation: a lineage segment (``kind="segment"``) read from
    its rows (with ``groups``, only the rows the branch has no state of its own for:
    they are in the group the row names), the inherited rows the branch has its own
    state of (``"overlaid"``, only with ``groups``), the members (``"members"``) or the
    session's own rows (``"own"``). ``groups`` limits each part to those groups, each
    by an index."""
    m, b, g = _M, _B, _G
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
        if kind == "overlaid":
            joined = b.join(m, on_row)
            group_id = b.c.group_id
            reduced = (b.c.reduced_contents, b.c.reduced_token_count, b.c.reduced_event_id)
            conditions = [
                b.c.tenant == tenant,
                b.c.session_id == session_id,
                b.c.member.is_(False),
            ]
        elif kind == "segment":
            joined = m.outerjoin(b, on_row)
            group_id = func.coalesce(b.c.group_id, m.c.group_id)
            unset = b.c.seq.is_(None)
            reduced = tuple(
                case((unset, getattr(m.c, name)), else_=getattr(b.c, name))
                for name in ("reduced_contents", "reduced_token_count", "reduced_event_id")
            )
            # by ids, the range is no index's: each id is looked up by the owner's
            # message_id index, not by walking its rows in seq order
            seq: Any = m.c.seq + 0 if message_ids is not None else m.c.seq
            conditions = [
                m.c.tenant == tenant,
                m.c.session_id == owner,
                seq > after,
                seq <= through,
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
    if message_ids is not None:
        conditions.append(m.c.message_id.in_(list(message_ids)))
    if groups is not None:
        chosen = groups if isinstance(groups, BindParameter) else list(groups)
        if kind in ("segment", "own"):
            conditions.append(m.c.group_id.in_(chosen))
        else:
            conditions.append(b.c.group_id.in_(chosen))
        if kind == "segment":
            conditions.append(b.c.seq.is_(None))
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
    groups: Sequence[str] | None = None,
    message_ids: Sequence[str] | None = None,
) -> Any:
    """The rows of ``lineage``'s session as one statement (a union of its parts), with
    the columns of :func:`~store.sql.mapping.message_columns`, then ``group_kind`` and
    ``owner_session_id``, then ``extra``; ``where`` filters each part, ``groups`` and
    ``message_ids`` limit it to those groups or messages (each by an index). Unordered:
    order the union's subquery."""
    session_id = lineage.session_id
    _noted(lineage)  # the rows it reads were sealed by others
    options: dict[str, Any] = {"extra": extra, "groups": groups, "message_ids": message_ids}
    parts = [
        _branch(
            tenant,
            session_id,
            "segment",
            where,
            owner=owner,
            after=after,
            through=through,
            **options,
        )
        for owner, after, through in lineage.segments
    ]
    if groups is not None and lineage.segments:
        parts.append(_branch(tenant, session_id, "overlaid", where, **options))
    parts.append(_branch(tenant, session_id, "members", where, **options))
    parts.append(_branch(tenant, session_id, "own", where, **options))
    return union_all(*parts)


@functools.cache
def _group_read(segments: int, keyed: bool) -> Any:
    """The statement of :func:`group_read` for a lineage of ``segments`` segments, built
    once (its values are bound: ``tenant``, ``session_id``, ``ids``, and ``owner_N``,
    ``after_N``, ``through_N`` of each segment)."""
    tenant: Any = bindparam("tenant")
    session_id: Any = bindparam("session_id")
    ids: Any = bindparam("ids", expanding=True)
    extra: tuple[Any, ...] = ()
    if keyed:
        s = SESSIONS.c
        mine = (s.tenant == tenant, s.session_id == session_id)
        extra = (
            select(s.incarnation).where(*mine).scalar_subquery().label("key_inc"),
            select(s.revision).where(*mine).scalar_subquery().label("key_rev"),
        )
    options: dict[str, Any] = {"extra": extra, "groups": ids}
    parts = [
        _branch(
            tenant,
            session_id,
            "segment",
            None,
            owner=bindparam(f"owner_{i}"),
            after=bindparam(f"after_{i}"),
            through=bindparam(f"through_{i}"),
            **options,
        )
        for i in range(segments)
    ]
    if segments:
        parts.append(_branch(tenant, session_id, "overlaid", None, **options))
    parts.append(_branch(tenant, session_id, "members", None, **options))
    parts.append(_branch(tenant, session_id, "own", None, **options))
    return union_all(*parts)


def group_read(
    tenant: str, lineage: Lineage, group_ids: Sequence[str], *, keyed: bool = False
) -> tuple[Any, dict[str, Any]]:
    """The conversation's rows of ``group_ids`` (:func:`conversation` with ``groups``;
    with ``keyed``, each row ends with the session's incarnation and revision as the
    statement saw them): a statement built once per number of segments, and its
    parameters. The projection's read of a fork's groups, every turn."""
    params: dict[str, Any] = {
        "tenant": tenant,
        "session_id": lineage.session_id,
        "ids": list(group_ids),
    }
    for i, (owner, after, through) in enumerate(lineage.segments):
        params.update({f"owner_{i}": owner, f"after_{i}": after, f"through_{i}": through})
    return _group_read(len(lineage.segments), keyed), params


@functools.cache
def _hashes_read(segments: int) -> Any:
    """The statement of :func:`stored_hashes_of` for ``segments`` segments, built once:
    each part looks ids up by a session's ``message_id`` index (bound: ``tenant``,
    ``session_id``, ``ids``, ``owner_N``)."""
    m, b = MESSAGES.c, BRANCH_ROWS.c
    tenant: Any = bindparam("tenant")
    session_id: Any = bindparam("session_id")
    ids: Any = bindparam("ids", expanding=True)
    owners: list[Any] = [bindparam(f"owner_{i}") for i in range(segments)]
    parts = [
        select(m.message_id, m.content_hash, m.session_id, m.seq).where(
            m.tenant == tenant, m.session_id == owner, m.message_id.in_(ids)
        )
        for owner in [*owners, session_id]
    ]
    members = and_(
        b.tenant == tenant,
        b.session_id == session_id,
        b.member,
        m.tenant == b.tenant,
        m.session_id == b.owner_session_id,
        m.seq == b.seq,
        m.message_id.in_(ids),
    )
    parts.append(select(m.message_id, m.content_hash, b.session_id, m.seq).where(members))
    return union_all(*parts)


async def stored_hashes_of(
    conn: AsyncConnection, tenant: str, lineage: Lineage, message_ids: Sequence[str] | None
) -> dict[str, str]:
    """The content hash of each of ``message_ids`` (None: of every message) that
    ``lineage``'s session holds, inherited or its own (what an append to a fork
    deduplicates against, and what an import of it finds stored): one statement a chunk
    of ids. The range of each segment is checked here: a condition on ``seq`` made
    SQLite walk the owner's rows by ``seq`` instead of looking the ids up."""
    if message_ids is None:
        return await _every_hash(conn, tenant, lineage)
    ranges = {owner: (after, through) for owner, after, through in lineage.segments}
    query = _hashes_read(len(ranges))
    params: dict[str, Any] = {"tenant": tenant, "session_id": lineage.session_id}
    params.update({f"owner_{i}": owner for i, owner in enumerate(ranges)})
    found: dict[str, str] = {}
    for start in range(0, len(message_ids), 500):
        params["ids"] = list(message_ids[start : start + 500])
        for message_id, digest, owner, seq in await conn.execute(query, params):
            after, through = ranges.get(owner, (0, seq))
            if owner == lineage.session_id or after < seq <= through:
                found[message_id] = digest
    return found


async def _every_hash(conn: AsyncConnection, tenant: str, lineage: Lineage) -> dict[str, str]:
    """:func:`stored_hashes_of` of every message the session holds (an import's check)."""
    m, b = MESSAGES.c, BRANCH_ROWS.c
    parts = [
        select(m.message_id, m.content_hash).where(
            m.tenant == tenant, m.session_id == owner, m.seq > after, m.seq <= through
        )
        for owner, after, through in lineage.segments
    ]
    parts.append(
        select(m.message_id, m.content_hash).where(
            m.tenant == tenant, m.session_id == lineage.session_id
        )
    )
    members = and_(
        b.tenant == tenant,
        b.session_id == lineage.session_id,
        b.member,
        m.tenant == b.tenant,
        m.session_id == b.owner_session_id,
        m.seq == b.seq,
    )
    parts.append(select(m.message_id, m.content_hash).where(members))
    return {row[0]: row[1] for row in await conn.execute(union_all(*parts))}
