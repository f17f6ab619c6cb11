"""The annotation state of a session, read by appends and by projections of in-flight
messages alike.

Annotation is incremental (:func:`strategies.groups.annotate`): new messages are
annotated from the session row (position, turn, tail), the unanswered calls and early
results (results stored before their call) that they name, and the groups those point
to, never from the history. :func:`load_state` reads exactly that; :func:`stored_hashes`
reads the content hashes that deduplication compares new messages with. Both only read:
an append writes what it annotated (:mod:`store.sql.append`), a projection writes
nothing (:mod:`store.sql.projection.pending`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Boolean, String, bindparam, literal_column, select, true, union_all
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import FromClause, Select

from store.sql import dialect
from store.sql.branches.rows import lineage_of, stored_hashes_of
from store.sql.schema import EARLY_RESULTS, FIRST_SEQ, MESSAGES, OPEN_CALLS, SESSIONS
from store.sql.sessions import KEYS, SESSION_COLUMNS, locked_session_row
from store.sql.statements import (
    among_params,
    in_key_list,
    key_list,
    key_params,
    select_among,
    select_calls_among,
)
from strategies.groups import AnnotationState, GroupInfo, Tail, referenced_ids
from strategies.messages import Message

__all__ = [
    "Loaded",
    "Prefetched",
    "load_state",
    "lock_and_prefetch",
    "prefetch",
    "referenced_calls",
    "stored_hashes",
]

_HASH_COLUMNS = ("message_id", "content_hash")


@dataclass(slots=True)
class Loaded:
    """What annotating new messages reads besides the session row."""

    state: AnnotationState
    groups: dict[str, RowMapping]
    """The stored groups the new messages may touch, by id."""
    call_rows: set[str]
    """The call ids of the unanswered calls read."""
    wanted_calls: set[str]
    """The call ids the new messages declare or answer."""
    early_rows: set[str]
    """The call ids of the early results read."""
    frozen: frozenset[str]
    """Groups of early results that compaction excluded: no call joins them."""


async def stored_hashes(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    messages: Sequence[Message],
    session: RowMapping | None = None,
) -> dict[str, str]:
    """The content hash of each message id of ``messages`` already stored in the session
    (with the session's row ``session``, a fork's inherited messages too)."""
    if session is not None and session["branch"] is not None:
        lineage = await lineage_of(conn, tenant, session)
        return await stored_hashes_of(conn, tenant, lineage, [m.message_id for m in messages])
    query = select_among(conn, "messages", "message_id", columns=_HASH_COLUMNS)
    stored: dict[str, str] = {}
    ids = {m.message_id for m in messages}
    for params in among_params(conn, key_params(tenant, session_id), ids):
        stored.update((row[0], row[1]) for row in await conn.execute(query, params))
    return stored


@dataclass(frozen=True, slots=True)
class Prefetched:
    """The session row of an append, locked, with what the append reads next when the
    locking statement could read it too (None: read it after the lock)."""

    session: RowMapping
    hashes: dict[str, str] | None
    """The content hash of each of the append's message ids stored in the session."""
    calls: Sequence[Mapping[str, Any]] | None
    """The open calls and early results of the append's call ids, as
    :func:`~store.sql.statements.select_calls_among` reads them."""


_PART = ("part", "key", "value", "flag")
"""The columns of the rows :func:`_with_reads` joins to the session row."""
_SEEN = ("seen_incarnation", "seen_revision")
"""The session's cache key as the snapshot of :func:`_with_reads` saw it."""


def _keyed(table: FromClause) -> tuple[Any, Any]:
    return (table.c.tenant == bindparam("tenant"), table.c.session_id == bindparam("session_id"))


def _part(name: str, key: Any, value: Any, flag: Any) -> list[Any]:
    tag = literal_column(f"'{name}'", String())
    return [tag.label("part"), key.label("key"), value.label("value"), flag.label("flag")]


@cache
def _with_reads(capabilities: dialect.Capabilities, *, lock: bool) -> Select[Any]:
    """The session row (locked ``FOR UPDATE OF`` it with ``lock``), the cache key its
    statement's snapshot saw, and, joined to it, the stored hashes of the ids bound as
    ``message_ids`` and the open calls and early results of those bound as
    ``call_ids``: one row each (or one row of nulls)."""
    no = literal_column("false", Boolean())
    found = union_all(
        select(*_part("h", MESSAGES.c.message_id, MESSAGES.c.content_hash, no)).where(
            *_keyed(MESSAGES), in_key_list(MESSAGES.c.message_id, "message_ids", capabilities)
        ),
        select(
            *_part("c", OPEN_CALLS.c.call_id, OPEN_CALLS.c.group_id, OPEN_CALLS.c.ambiguous)
        ).where(*_keyed(OPEN_CALLS), in_key_list(OPEN_CALLS.c.call_id, "call_ids", capabilities)),
        select(*_part("e", EARLY_RESULTS.c.call_id, EARLY_RESULTS.c.group_id, no)).where(
            *_keyed(EARLY_RESULTS),
            in_key_list(EARLY_RESULTS.c.call_id, "call_ids", capabilities),
        ),
    ).subquery("found")
    seen = SESSIONS.alias("seen")
    seen_row = select(seen).where(*_keyed(seen)).subquery("seen_row")
    seen_key = [
        select(seen_row.c[column]).scalar_subquery().label(label)
        for label, column in zip(_SEEN, ("incarnation", "revision"), strict=True)
    ]
    parts = [found.c[name] for name in _PART]
    if lock:
        locked = locked_session_row()
        return select(*locked.c, *seen_key, *parts).select_from(locked.outerjoin(found, true()))
    return (
        select(*SESSION_COLUMNS, *seen_key, *parts)
        .select_from(SESSIONS.outerjoin(found, true()))
        .where(*KEYS)
    )


async def lock_and_prefetch(
    conn: AsyncConnection, tenant: str, session_id: str, messages: Sequence[Message]
) -> Prefetched | None:
    """Lock the session row where the database locks rows (``FOR UPDATE``) and read, in
    the same statement, the hashes and calls an append of ``messages`` reads next; None
    where it has no row locks (SQLite) or the session does not exist yet.

    A statement's rows are those of the snapshot it began with, and a ``FOR UPDATE``
    that waited for a writer returns the session row as that writer left it. Every
    write of a session's messages or calls moves its cache key (incarnation, revision),
    so the statement also reads the key its snapshot saw: when it is not the locked
    row's, the reads are left to statements after the lock (``hashes`` and ``calls``
    None). A fork's hashes include inherited messages: read after the lock too."""
    if not dialect.of(conn).row_locks:
        return None
    return await _prefetch(conn, tenant, session_id, messages, lock=True)


async def prefetch(
    conn: AsyncConnection, tenant: str, session_id: str, messages: Sequence[Message]
) -> Prefetched | None:
    """What :func:`lock_and_prefetch` reads, in one statement that locks nothing: the
    session row as of the statement's snapshot, with the hashes and calls of
    ``messages`` (None: the session does not exist yet). Where the database locks rows."""
    return await _prefetch(conn, tenant, session_id, messages, lock=False)


async def _prefetch(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    messages: Sequence[Message],
    *,
    lock: bool,
) -> Prefetched | None:
    capabilities = dialect.of(conn)
    params = {
        "tenant": tenant,
        "session_id": session_id,
        "message_ids": key_list({m.message_id for m in messages}, capabilities),
        "call_ids": key_list(referenced_calls(messages), capabilities),
    }
    query = _with_reads(capabilities, lock=lock)
    rows = [r._mapping for r in (await conn.execute(query, params))]
    if not rows:
        return None
    session = rows[0]
    if tuple(session[label] for label in _SEEN) != (session["incarnation"], session["revision"]):
        return Prefetched(session, None, None)
    hashes = {r["key"]: r["value"] for r in rows if r["part"] == "h"}
    calls = [
        {
            "early": r["part"] == "e",
            "call_id": r["key"],
            "group_id": r["value"],
            "ambiguous": r["flag"],
        }
        for r in rows
        if r["part"] in ("c", "e")
    ]
    return Prefetched(session, None if session["branch"] is not None else hashes, calls)


def _group_info(row: RowMapping) -> GroupInfo:
    return GroupInfo(
        group_id=row["group_id"],
        kind=row["kind"],
        turn=row["turn"],
        first_position=row["first_position"],
        has_reasoning=row["has_reasoning"],
        pending_calls=row["pending_calls"],
        orphan=row["orphan"],
    )


def referenced_calls(messages: Iterable[Message]) -> set[str]:
    """The call ids the messages' calls declare, their results answer and their approval
    requests approve (:func:`strategies.groups.referenced_ids`)."""
    wanted: set[str] = set()
    for message in messages:
        wanted.update(referenced_ids(message))
    return wanted


async def _calls_of(
    conn: AsyncConnection,
    params: Mapping[str, Any],
    session: Mapping[Any, Any],
    wanted: set[str],
    given: Sequence[Mapping[str, Any]] | None,
) -> list[Mapping[str, Any]]:
    """The open calls and early results of the ``wanted`` call ids: those ``given``
    (read with the session row) or read now (none in a session that stores nothing)."""
    if given is not None:
        return [row for row in given if row["call_id"] in wanted]
    if session["next_seq"] == FIRST_SEQ:
        return []
    calls = select_calls_among(conn)
    found: list[Mapping[str, Any]] = []
    for bound in among_params(conn, params, wanted):
        found.extend((await conn.execute(calls, bound)).mappings())
    return found


async def load_state(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    session: Mapping[Any, Any],
    fresh: Sequence[Message],
    calls: Sequence[Mapping[str, Any]] | None = None,
) -> Loaded:
    """The annotation state ``fresh`` messages are annotated from, read from the session
    row (``session``), the unanswered calls and early results they name (read here
    unless given as ``calls``, of those call ids or more), and the groups those and the
    session's tail point to: never a scan of the history."""
    wanted = referenced_calls(fresh)
    open_calls: dict[str, str] = {}
    ambiguous: set[str] = set()
    params = key_params(tenant, session_id)
    early: dict[str, str] = {}
    for row in await _calls_of(conn, params, session, wanted, calls):
        if row["early"]:
            early[row["call_id"]] = row["group_id"]
        elif row["ambiguous"] or row["group_id"] is None:
            ambiguous.add(row["call_id"])
        else:
            open_calls[row["call_id"]] = row["group_id"]
    group_ids = set(open_calls.values()) | set(early.values())
    if session["tail_group_id"] is not None:
        group_ids.add(session["tail_group_id"])
    groups: dict[str, RowMapping] = {}
    query = select_among(conn, "groups", "group_id")
    for bound in among_params(conn, params, group_ids):
        groups.update(
            (row["group_id"], row) for row in (await conn.execute(query, bound)).mappings()
        )
    infos = {gid: _group_info(row) for gid, row in groups.items()}
    tail = None
    if session["tail_group_id"] in infos:
        tail = Tail(infos[session["tail_group_id"]], session["tail_mode"])
    state = AnnotationState(
        position=session["position"],
        turn=session["turn"],
        open_calls=open_calls,
        ambiguous_calls=frozenset(ambiguous),
        pending_groups={gid: info for gid, info in infos.items() if info.pending_calls > 0},
        tail=tail,
        early_results={c: g for c, g in early.items() if g in infos},
        waiting_groups={g: infos[g] for g in early.values() if g in infos},
    )
    frozen = frozenset(g for g in early.values() if g in groups and groups[g]["excluded"])
    return Loaded(state, groups, set(open_calls) | ambiguous, wanted, set(early), frozen)
