"""The mirror: the few records of a session that a change set or restore can touch.

A write loads them, in its write transaction, into a partial
:class:`~store.rules.records.SessionRecord` (groups by id or anchor, message rows by id;
contents are never loaded: they are never rewritten), keeping a copy of each as loaded.
The shared rules (:mod:`store.rules.changes`) run on it, and
:mod:`~store.sql.compaction.write_back` writes back what they changed, leaving a
:class:`Written`: the rows after the write, for the view cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    Table,
    any_,
    bindparam,
    cast,
    false,
    func,
    select,
    true,
    union_all,
)
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import FromClause, Select

from store.errors import SessionNotFound
from store.rules.records import GroupRecord, MessageRecord, SessionRecord
from store.sql import dialect
from store.sql.branches.rows import Filter, conversation, read_lineage
from store.sql.mapping import timestamp
from store.sql.schema import GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import KEYS, SESSION_COLUMNS, locked_session_row
from store.sql.statements import (
    CHUNK,
    among_params,
    in_key_list,
    key_list,
    key_params,
    select_among,
    select_groups_around,
)
from strategies.messages import Message
from strategies.view import Totals

__all__ = [
    "Locked",
    "Mirror",
    "Written",
    "before_totals",
    "count_stored",
    "load_groups",
    "load_groups_around",
    "load_rows",
    "load_rows_by_id",
    "lock_with_groups",
    "mirror_of",
]


@dataclass(frozen=True)
class Written:
    """The groups a write-back loaded or inserted, as rows after the write."""

    groups: dict[str, Mapping[str, Any]]
    """Every group loaded or inserted, by id: its row as a read would return it now."""
    messages: dict[str, tuple[tuple[int, Message], ...]]
    """The ``(seq, message)`` pairs of the active summaries inserted."""
    excluded: Totals
    """The session's excluded totals after the write."""


@dataclass
class Mirror:
    """A partial session: the loaded groups and rows, and their state as loaded."""

    session: SessionRecord
    row: RowMapping
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Group id to (message count, token count) as loaded."""
    original: dict[str, GroupRecord] = field(default_factory=dict)
    original_rows: dict[str, MessageRecord] = field(default_factory=dict)
    loaded: dict[str, Mapping[Any, Any]] = field(default_factory=dict)
    """The group rows as loaded."""
    written: Written | None = None
    """After :func:`write_back`: the loaded and inserted groups' rows as written."""
    inherited: dict[str, tuple[str, int]] = field(default_factory=dict)
    """A fork's loaded rows that another session stores: message id to (owner, seq)."""


def mirror_of(row: RowMapping) -> Mirror:
    """An empty mirror of the session ``row``."""
    session = SessionRecord(
        tenant=row["tenant"],
        session_id=row["session_id"],
        tokenizer=row["tokenizer"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        next_seq=row["next_seq"],
        revision=row["revision"],
    )
    return Mirror(session=session, row=row)


def before_totals(row: RowMapping) -> Totals:
    """The session's active totals, from its aggregates."""
    return Totals(
        messages=row["active_messages"], groups=row["active_groups"], tokens=row["active_tokens"]
    )


_PLACEHOLDER_ROLE = "user"
"""The role of the placeholder message a loaded row carries (contents are never read)."""


def _keys(table: Table, mirror: Mirror) -> tuple[Any, Any]:
    s = mirror.session
    return (table.c.tenant == s.tenant, table.c.session_id == s.session_id)


def _add_group(mirror: Mirror, row: Mapping[Any, Any]) -> None:
    mirror.loaded[row["group_id"]] = row
    group = GroupRecord(
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


def _bound_keys(table: FromClause) -> tuple[Any, Any]:
    return (table.c.tenant == bindparam("tenant"), table.c.session_id == bindparam("session_id"))


_GROUP_LABELS = tuple((f"g_{c.key}", c.key) for c in GROUPS.c)
_GROUP_COLUMNS = tuple(c.key for c in GROUPS.c)
_SEEN_KEY = ("seen_incarnation", "seen_revision")
"""The session's cache key as the snapshot of a locking :func:`_session_with_groups`
saw it (see :func:`lock_with_groups`)."""


def _groups_at(capabilities: dialect.Capabilities) -> int:
    """Where the group columns start in a row of :func:`_session_with_groups`: after the
    session's columns, the count of taken ids and, where it locks, the key it saw."""
    return len(SESSIONS.c) + 1 + (len(_SEEN_KEY) if capabilities.row_locks else 0)


def _stored_count(capabilities: dialect.Capabilities, ids: str) -> Select[Any]:
    """How many of the session's message ids are in the key list ``ids`` (a parameter)."""
    return (
        select(func.count())
        .select_from(MESSAGES)
        .where(*_bound_keys(MESSAGES), in_key_list(MESSAGES.c.message_id, ids, capabilities))
    )


@cache
def _count_stored(capabilities: dialect.Capabilities) -> Select[Any]:
    return _stored_count(capabilities, "ids")


@cache
def _session_with_groups(capabilities: dialect.Capabilities) -> Select[Any]:
    """The session row, the count of its messages whose id is in ``taken``, and,
    left-joined to it, its groups whose id is in ``ids`` and every group at one of
    their anchors (a group may come twice)."""
    touched = GROUPS.alias("touched")
    of_touched = (
        touched.c.tenant == bindparam("tenant"),
        touched.c.session_id == bindparam("session_id"),
        in_key_list(touched.c.group_id, "ids", capabilities),
    )
    if capabilities.array_parameters:
        # their anchors gathered once, into one array: as a semi-join, planned on
        # guesses (a new table, one session in it), the session's groups were scanned
        # again for each group of the session, the session's row locked meanwhile
        gathered = select(func.array_agg(touched.c.anchor)).where(*of_touched)
        as_array = cast(gathered.scalar_subquery(), ARRAY(GROUPS.c.anchor.type))  # one value
        at_anchor = GROUPS.c.anchor == any_(as_array)
    else:
        at_anchor = GROUPS.c.anchor.in_(select(touched.c.anchor).where(*of_touched))
    around = union_all(
        select(GROUPS).where(
            *_bound_keys(GROUPS), in_key_list(GROUPS.c.group_id, "ids", capabilities)
        ),
        select(GROUPS).where(
            *_bound_keys(GROUPS),
            # both values, written out (no parameter to render): lets SQLite use the
            # (excluded, anchor) index
            GROUPS.c.excluded.in_([false(), true()]),
            at_anchor,
        ),
    ).subquery("around")
    # bound, not correlated: counted once, not once a joined row
    taken = _stored_count(capabilities, "taken").scalar_subquery().label("taken_count")
    columns = [around.c[name].label(label) for label, name in _GROUP_LABELS]
    if not capabilities.row_locks:
        return (
            select(*SESSION_COLUMNS, taken, *columns)
            .select_from(SESSIONS.outerjoin(around, true()))
            .where(*KEYS)
        )
    seen = SESSIONS.alias("seen")
    seen_row = select(seen).where(*_bound_keys(seen)).subquery("seen_row")
    seen_key = [
        select(seen_row.c[column]).scalar_subquery().label(label)
        for label, column in zip(_SEEN_KEY, ("incarnation", "revision"), strict=True)
    ]
    locked = locked_session_row()
    return select(*locked.c, taken, *seen_key, *columns).select_from(
        locked.outerjoin(around, true())
    )


@dataclass(frozen=True, slots=True)
class Locked:
    """The session row of a write, locked, with the groups a change set touches."""

    session: RowMapping
    groups: Sequence[Mapping[str, Any]]
    """The touched groups and their anchors' neighbours (a group may come twice)."""
    taken: int
    """How many of the ``taken`` ids asked for are stored message ids."""


async def lock_with_groups(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    group_ids: Collection[str],
    taken: Collection[str],
    *,
    lock: bool = True,
) -> Locked | None:
    """Lock the session row as :func:`~store.sql.sessions.lock_session` does and read
    the groups :func:`load_groups_around` loads and how many of the ``taken`` ids are
    stored message ids; None when there are too many ids for one statement
    (:class:`~store.errors.SessionNotFound` when the session does not exist).

    Where the transaction holds the database's write lock from its start (SQLite's
    ``BEGIN IMMEDIATE``) that is one statement. Where the row is locked by the read
    (``FOR UPDATE OF`` the session row), it is one statement too when the statement did
    not read past a write: a statement's rows are those of the snapshot it began with,
    and a ``FOR UPDATE`` that waited for a writer returns the session row as that writer
    left it, the groups as they were before. Every write of a session's groups or
    messages moves its cache key (incarnation, revision), so the statement also reads
    the key its snapshot saw; when the two differ the groups are read again, now that
    the lock is held (a second statement, as every write did before).

    Without ``lock`` it is the same read, as of its statement's snapshot, locking
    nothing (for a write in one statement that is gated by the session's revision).
    """
    if len(group_ids) > CHUNK or len(taken) > CHUNK:
        return None
    capabilities = dialect.of(conn)
    if not lock:
        capabilities = replace(capabilities, row_locks=False)
    query = _session_with_groups(capabilities)
    params = {
        "tenant": tenant,
        "session_id": session_id,
        "ids": key_list(group_ids, capabilities),
        "taken": key_list(taken, capabilities),
    }
    rows = (await conn.execute(query, params)).all()
    if rows and capabilities.row_locks and not _saw_locked(rows[0]._mapping):
        rows = (await conn.execute(query, params)).all()  # the lock held: a fresh snapshot
    if not rows:
        raise SessionNotFound(session_id, tenant=tenant)
    first = rows[0]._mapping
    start = _groups_at(capabilities)
    group_id = start + _GROUP_COLUMNS.index("group_id")
    groups = [
        dict(zip(_GROUP_COLUMNS, row[start:], strict=True))
        for row in rows
        if row[group_id] is not None
    ]
    return Locked(first, groups, int(first["taken_count"]))


async def count_stored(
    conn: AsyncConnection, tenant: str, session_id: str, message_ids: Collection[str]
) -> int:
    """How many of ``message_ids`` are stored message ids of the session (as
    :func:`lock_with_groups` counts its ``taken`` ids)."""
    if not message_ids:
        return 0
    capabilities = dialect.of(conn)
    params = {
        "tenant": tenant,
        "session_id": session_id,
        "ids": key_list(message_ids, capabilities),
    }
    return int((await conn.execute(_count_stored(capabilities), params)).scalar_one())


def _saw_locked(row: Mapping[str, Any]) -> bool:
    """Whether a locking :func:`_session_with_groups` read its groups in the snapshot of
    the session row it locked (the key it saw is the locked row's)."""
    seen = tuple(row[label] for label in _SEEN_KEY)
    return seen == (row["incarnation"], row["revision"])


def add_groups(mirror: Mirror, found: Sequence[Mapping[str, Any]], wanted: Collection[str]) -> None:
    """Add the rows of :func:`lock_with_groups` to ``mirror`` as :func:`load_groups_around`
    adds its own."""
    have = mirror.session.groups
    for row in sorted(found, key=lambda r: r["group_id"] not in wanted):
        if row["group_id"] not in have:
            _add_group(mirror, row)


async def load_groups_around(
    conn: AsyncConnection, mirror: Mirror, group_ids: Iterable[str]
) -> None:
    """Load the groups ``group_ids`` and every group at one of their anchors: what
    :func:`load_groups` by id and then by the loaded groups' anchors loads, in one
    statement (a round trip less on a server)."""
    s = mirror.session
    keys = key_params(s.tenant, s.session_id)
    query = select_groups_around(conn)
    wanted = set(group_ids) - set(s.groups)
    found: list[RowMapping] = []
    for params in among_params(conn, keys, wanted):
        found.extend((await conn.execute(query, params)).mappings())
    # the groups asked for first, then their neighbours, as the two reads added them
    for row in sorted(found, key=lambda r: r["group_id"] not in wanted):
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
    if mirror.row["branch"] is not None:
        wanted = sorted(ids)
        for start in range(0, len(wanted), CHUNK):
            part = wanted[start : start + CHUNK]
            await _load_branch_rows(conn, mirror, None, message_ids=part)
        return
    query = select_among(conn, "messages", "message_id", columns=_ROW_NAMES)
    found: list[RowMapping] = []
    keys = key_params(mirror.session.tenant, mirror.session.session_id)
    for params in among_params(conn, keys, list(ids)):
        found.extend((await conn.execute(query, params)).mappings())
    _add_rows(mirror, found)


async def load_rows(
    conn: AsyncConnection, mirror: Mirror, condition: Any, *, in_branch: Filter | None = None
) -> None:
    """Load the message rows matching ``condition`` (contents left out: never rewritten);
    in a fork, its conversation's rows matching ``in_branch``."""
    if mirror.row["branch"] is not None and in_branch is not None:
        await _load_branch_rows(conn, mirror, in_branch)
        return
    query = _ROW_COLUMNS.where(*_keys(MESSAGES, mirror), condition)
    _add_rows(mirror, (await conn.execute(query)).mappings())


async def _load_branch_rows(
    conn: AsyncConnection,
    mirror: Mirror,
    where: Filter | None,
    *,
    message_ids: Sequence[str] | None = None,
) -> None:
    """Load a fork's rows (its own and inherited ones) matching ``where`` (or with
    ``message_ids``)."""
    s = mirror.session
    lineage = await read_lineage(conn, s.tenant, s.session_id)
    rows = conversation(s.tenant, lineage, where, message_ids=message_ids).subquery()
    found = []
    for row in (await conn.execute(select(rows))).mappings():
        values = {name: row[name] for name in _ROW_NAMES}
        values["stored_at"] = timestamp(values["stored_at"])
        found.append(values)
        if row["owner_session_id"] != s.session_id:
            mirror.inherited[row["message_id"]] = (row["owner_session_id"], int(row["seq"]))
    _add_rows(mirror, found)


def _add_rows(mirror: Mirror, found: Iterable[Mapping[Any, Any]]) -> None:
    # Sorted here, not in SQL: with ``message_id IN (...)`` an ORDER BY seq makes SQLite
    # walk the session's whole primary key to avoid a sort (O(history) per compaction).
    rows = sorted(found, key=lambda r: int(r["seq"]))
    for row in rows:
        placeholder = Message(role=_PLACEHOLDER_ROLE, contents=[], message_id=row["message_id"])
        mem = MessageRecord(
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
