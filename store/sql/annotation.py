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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.sql.branches.rows import lineage_of, stored_hashes_of
from store.sql.schema import FIRST_SEQ
from store.sql.statements import among_params, key_params, select_among, select_calls_among
from strategies.groups import AnnotationState, GroupInfo, Tail, call_links
from strategies.messages import Message

__all__ = ["Loaded", "load_state", "referenced_calls", "stored_hashes"]

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
    """The call ids the messages' calls declare and their results answer."""
    wanted: set[str] = set()
    for message in messages:
        calls, results = call_links(message)
        wanted.update(c for c in calls if c is not None)
        wanted.update(results)
    return wanted


async def load_state(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    session: RowMapping,
    fresh: Sequence[Message],
) -> Loaded:
    """The annotation state ``fresh`` messages are annotated from, read from the session
    row (``session``), the unanswered calls and early results they name, and the groups
    those and the session's tail point to: never a scan of the history."""
    wanted = referenced_calls(fresh)
    open_calls: dict[str, str] = {}
    ambiguous: set[str] = set()
    params = key_params(tenant, session_id)
    blank = session["next_seq"] == FIRST_SEQ
    early: dict[str, str] = {}
    calls = select_calls_among(conn)
    for bound in [] if blank else among_params(conn, params, wanted):
        for row in (await conn.execute(calls, bound)).mappings():
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
