"""The audit in SQL: its events, written and read; excluded groups, why a message is (not)
sent, stats.

Every event row is written here (:func:`write_event`: a compaction's, a restore's, a
retraction's; :func:`record_event`: a write made outside a change set, such as a
redaction or a repair) and read back here (:func:`read_events`), its stored texts (the
parameters, the note) encoded and decoded by :mod:`store.sql.codec`. ``why`` reads the
facts of the message's group and leaves the decision to
:func:`store.rules.why.explain`; ``stats`` reads the sessions' aggregates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import String, Text, Update, bindparam, func, insert, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import UpdateBase

from store.errors import ChatledgerError, CorruptRowError
from store.models import CompactionEvent, EventOutcome, ExcludedGroup, Phase, Stats, WhyResult
from store.rules.changes import log_event
from store.rules.why import GroupFacts, explain, not_stored
from store.sql import dialect
from store.sql.branches.rows import conversation, read_lineage
from store.sql.codec import (
    ENCODED,
    decode_event_note,
    decode_event_params,
    encode_event_note,
    encode_event_params,
)
from store.sql.schema import EVENT_GROUPS, EVENTS, GROUPS, MESSAGES, SESSIONS
from store.sql.sessions import read_session
from store.sql.statements import chunks, insert_rows
from strategies.changeset import Diagnostic

__all__ = [
    "INSERT_EVENT",
    "event_from_row",
    "event_note",
    "event_values",
    "excluded_groups",
    "link_rows",
    "read_events",
    "record_event",
    "stats",
    "why",
    "write_event",
    "write_event_and_session",
]


@contextmanager
def corrupt_rows(what: str, *, tenant: str, session_id: str | None) -> Iterator[None]:
    """Report a row that fails to load or validate as :class:`CorruptRowError`.

    ``what`` names the row (a group, the session aggregates); chatledger's own errors
    pass through unchanged.
    """
    try:
        yield
    except ChatledgerError:
        raise
    except (ValueError, TypeError, KeyError, LookupError) as error:  # ValidationError too
        raise CorruptRowError(
            f"{what}: {error}", tenant=tenant, session_id=session_id or "", seq=None
        ) from error


_EVENT_COLUMNS = tuple(
    sql_cast(column, Text).label(column.key) if column.key == "params" else column
    for column in EVENTS.c
)
"""An event row's columns, its ``params`` as the stored text."""


def event_from_row(row: RowMapping) -> CompactionEvent:
    """The public model of one event row (its group lists are kept in ``note``)."""
    try:
        place = (row["tenant"], row["session_id"], row["event_id"])
        note = decode_event_note(*place, row["note"])
        return CompactionEvent(
            id=row["event_id"],
            session_id=row["session_id"],
            tenant=row["tenant"],
            phase=row["phase"],
            strategy=row["strategy"],
            params=decode_event_params(*place, row["params"]),
            messages_before=row["messages_before"],
            messages_after=row["messages_after"],
            groups_before=row["groups_before"],
            groups_after=row["groups_after"],
            tokens_before=row["tokens_before"],
            tokens_after=row["tokens_after"],
            created_at=row["created_at"],
            excluded=tuple(note.get("excluded", ())),
            summarized={k: tuple(v) for k, v in note.get("summarized", ())},
            reduced=tuple(note.get("reduced", ())),
            restored=tuple(note.get("restored", ())),
            reasons=dict(note.get("reasons", {})),
            outcome=row["outcome"],
            duration_seconds=row["duration_seconds"],
            attempts=row["attempts"],
            summarizer=row["summarizer"],
            summarizer_model=row["summarizer_model"],
            diagnostics=tuple(Diagnostic.from_json(d) for d in note.get("diagnostics", ())),
        )
    except (ValueError, TypeError, KeyError) as error:
        raise CorruptRowError(
            f"event {row.get('event_id')!r}: {error}",
            tenant=str(row.get("tenant")),
            session_id=str(row.get("session_id")),
            seq=None,
        ) from error


async def read_events(
    conn: AsyncConnection,
    tenant: str,
    session_id: str | None,
    *,
    since: datetime | None = None,
    strategy: str | None = None,
    phase: Phase | None = None,
    limit: int | None = None,
    event_id: str | None = None,
    outcome: EventOutcome | None = None,
) -> list[CompactionEvent]:
    """Events newest first by (created_at, session_id, ordinal)."""
    query = select(*_EVENT_COLUMNS).where(EVENTS.c.tenant == tenant)
    if session_id is not None:
        query = query.where(EVENTS.c.session_id == session_id)
    if since is not None:
        query = query.where(EVENTS.c.created_at >= since)
    if strategy is not None:
        query = query.where(EVENTS.c.strategy == strategy)
    if phase is not None:
        query = query.where(EVENTS.c.phase == phase)
    if event_id is not None:
        query = query.where(EVENTS.c.event_id == event_id)
    if outcome is not None:
        query = query.where(EVENTS.c.outcome == outcome)
    query = query.order_by(
        EVENTS.c.created_at.desc(), EVENTS.c.session_id.desc(), EVENTS.c.number.desc()
    )
    if limit is not None:
        query = query.limit(limit)
    return [event_from_row(r) for r in (await conn.execute(query)).mappings()]


async def _event_times(
    conn: AsyncConnection, tenant: str, session_id: str, ids: Iterable[str]
) -> dict[str, datetime]:
    times: dict[str, datetime] = {}
    for part in chunks(sorted(set(ids))):
        query = select(EVENTS.c.event_id, EVENTS.c.created_at).where(
            EVENTS.c.tenant == tenant,
            EVENTS.c.session_id == session_id,
            EVENTS.c.event_id.in_(part),
        )
        times.update((r[0], r[1]) for r in await conn.execute(query))
    return times


async def excluded_groups(
    conn: AsyncConnection, tenant: str, session_id: str
) -> list[ExcludedGroup]:
    """The session's excluded groups, in projection order."""
    await read_session(conn, tenant, session_id)
    query = (
        select(GROUPS)
        .where(
            GROUPS.c.tenant == tenant,
            GROUPS.c.session_id == session_id,
            GROUPS.c.excluded.is_(True),
        )
        .order_by(GROUPS.c.anchor, GROUPS.c.slot)
    )
    with corrupt_rows("excluded groups", tenant=tenant, session_id=session_id):
        rows = list((await conn.execute(query)).mappings())
    times = await _event_times(
        conn, tenant, session_id, (r["excluded_event_id"] for r in rows if r["excluded_event_id"])
    )
    found = []
    for r in rows:
        with corrupt_rows(f"group {r['group_id']!r}", tenant=tenant, session_id=session_id):
            found.append(
                ExcludedGroup(
                    group_id=r["group_id"],
                    kind=r["kind"],
                    message_count=r["message_count"],
                    tokens=r["token_count"],
                    reason=r["excluded_reason"],
                    event_id=r["excluded_event_id"],
                    summary_group_id=r["summarized_by"],
                    excluded_at=times.get(r["excluded_event_id"] or ""),
                )
            )
    return found


async def _later_user_group(conn: AsyncConnection, group: RowMapping) -> bool:
    g = GROUPS.c
    query = (
        select(g.group_id)
        .where(
            g.tenant == group["tenant"],
            g.session_id == group["session_id"],
            g.excluded.is_(False),
            g.kind == "user",
            (g.anchor > group["anchor"])
            | ((g.anchor == group["anchor"]) & (g.slot > group["slot"])),
        )
        .limit(1)
    )
    return (await conn.execute(query)).first() is not None


async def why(conn: AsyncConnection, tenant: str, session_id: str, message_id: str) -> WhyResult:
    """Whether ``message_id`` is in the context built without a strategy, and why."""
    session = await read_session(conn, tenant, session_id)
    query = select(MESSAGES.c.group_id, MESSAGES.c.reduced_event_id).where(
        MESSAGES.c.tenant == tenant,
        MESSAGES.c.session_id == session_id,
        MESSAGES.c.message_id == message_id,
    )
    if session["branch"] is not None:  # a fork's message may be one it inherits
        lineage = await read_lineage(conn, tenant, session_id)
        rows = conversation(tenant, lineage, message_ids=[message_id]).subquery()
        query = select(rows.c.group_id, rows.c.reduced_event_id)
    found = (await conn.execute(query)).first()
    if found is None:
        raise not_stored(message_id, session_id)
    group_id, reduced_by = found
    with corrupt_rows(f"group {group_id!r}", tenant=tenant, session_id=session_id):
        group_query = select(GROUPS).where(
            GROUPS.c.tenant == tenant,
            GROUPS.c.session_id == session_id,
            GROUPS.c.group_id == group_id,
        )
        group = (await conn.execute(group_query)).mappings().one()
        stale = (
            not group["excluded"]
            and group["pending_calls"] > 0
            and await _later_user_group(conn, group)
        )
        facts = GroupFacts(
            group_id=group["group_id"],
            excluded=bool(group["excluded"]),
            reason=group["excluded_reason"],
            event_id=group["excluded_event_id"],
            summarized_by=group["summarized_by"],
            orphan=bool(group["orphan"]),
            stale=stale,
        )
        return explain(message_id, facts, reduced_by=reduced_by)


async def stats(conn: AsyncConnection, tenant: str, session_id: str | None) -> Stats:
    """Stored versus active counts, from the sessions' aggregates."""
    s = SESSIONS.c
    if session_id is not None:
        await read_session(conn, tenant, session_id)
    columns = (
        s.stored_messages,
        s.stored_groups,
        s.stored_tokens,
        s.active_messages,
        s.active_groups,
        s.active_tokens,
        s.event_count,
    )
    query = select(func.count(), *(func.coalesce(func.sum(c), 0) for c in columns)).where(
        s.tenant == tenant
    )
    if session_id is None:  # a tail repeats its session, rows kept for forks are no session
        query = query.where(s.branch.is_(None) | (s.branch == "fork"))
    if session_id is not None:
        query = query.where(s.session_id == session_id)
    what = "session aggregates" if session_id is not None else "tenant aggregates"
    with corrupt_rows(what, tenant=tenant, session_id=session_id):
        values = [int(v) for v in (await conn.execute(query)).one()]
        return _stats(tenant, session_id, values)


def _stats(tenant: str, session_id: str | None, values: list[int]) -> Stats:
    return Stats(
        tenant=tenant,
        session_id=session_id,
        sessions=values[0],
        stored_messages=values[1],
        stored_groups=values[2],
        stored_tokens=values[3],
        active_messages=values[4],
        active_groups=values[5],
        active_tokens=values[6],
        events=values[7],
    )


def event_note(event: CompactionEvent) -> dict[str, Any]:
    """The event's ordered group lists, kept verbatim in its ``note`` column."""
    return {
        "excluded": list(event.excluded),
        "summarized": [[k, list(v)] for k, v in event.summarized.items()],
        "reduced": list(event.reduced),
        "restored": list(event.restored),
        "reasons": event.reasons,
        "diagnostics": [d.as_json() for d in event.diagnostics],
    }


def link_rows(event: CompactionEvent) -> list[tuple[str, str]]:
    """The event's links to groups: ``(group_id, action)``, each once."""
    links: list[tuple[str, str]] = [(g, "excluded") for g in event.excluded]
    for summary, replaced in event.summarized.items():
        links.append((summary, "summary_inserted"))
        links.extend((g, "summarized") for g in replaced)
    links.extend((g, "reduced") for g in event.reduced)
    links.extend((g, "restored") for g in event.restored)
    return list(dict.fromkeys(links))


INSERT_EVENT = insert(EVENTS).values(params=bindparam("params_json", type_=ENCODED))
"""``INSERT`` of an event row, its ``params`` encoded and bound as ``params_json``."""


def event_values(
    tenant: str, session_id: str, event: CompactionEvent, *, number: int, revision: int
) -> dict[str, Any]:
    """The parameters of :data:`INSERT_EVENT` for ``event``: every column of the
    event row, ``params`` as ``params_json``."""
    place = (tenant, session_id, event.id)
    return {
        "tenant": tenant,
        "session_id": session_id,
        "event_id": event.id,
        "number": number,
        "phase": event.phase,
        "strategy": event.strategy,
        "params_json": encode_event_params(*place, event.params),
        "messages_before": event.messages_before,
        "messages_after": event.messages_after,
        "groups_before": event.groups_before,
        "groups_after": event.groups_after,
        "tokens_before": event.tokens_before,
        "tokens_after": event.tokens_after,
        "revision": revision,
        "created_at": event.created_at,
        "note": encode_event_note(*place, event_note(event)),
        "outcome": event.outcome,
        "duration_seconds": event.duration_seconds,
        "attempts": event.attempts,
        "summarizer": event.summarizer,
        "summarizer_model": event.summarizer_model,
    }


async def write_event(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    event: CompactionEvent,
    *,
    number: int,
    revision: int,
) -> None:
    """Insert the event row (its ``number`` in the session) and its links to groups."""
    values = event_values(tenant, session_id, event, number=number, revision=revision)
    await conn.execute(INSERT_EVENT, values)
    rows = [
        {
            "tenant": tenant,
            "session_id": session_id,
            "event_id": event.id,
            "group_id": group_id,
            "action": action,
        }
        for group_id, action in link_rows(event)
    ]
    for part in chunks(rows):
        await conn.execute(insert_rows("event_groups"), list(part))


_EVENT_PREFIX = "e_"
"""The prefix of an event column's parameter in :func:`_with_event`."""


@cache
def _with_event(session_update: Update, also: tuple[UpdateBase, ...]) -> Update:
    """``session_update`` after data-modifying ``WITH`` queries: the ``INSERT`` of an
    event row (each column bound as ``e_<column>``, ``params`` encoded), the ``INSERT``
    of its links, the ``unnest`` of the arrays ``link_groups`` and ``link_actions``, and
    each statement of ``also``. PostgreSQL runs every such query of a statement to
    completion."""
    values = {
        column.key: bindparam(
            _EVENT_PREFIX + column.key, type_=ENCODED if column.key == "params" else column.type
        )
        for column in EVENTS.c  # every one: :func:`event_values` gives them all
    }
    event = insert(EVENTS).values(values).cte("written_event")
    links = (
        func.unnest(
            bindparam("link_groups", type_=ARRAY(String())),
            bindparam("link_actions", type_=ARRAY(String())),
        )
        .table_valued("group_id", "action")
        .render_derived()
    )
    keys = [values[name] for name in ("tenant", "session_id", "event_id")]
    linked = (
        insert(EVENT_GROUPS)
        .from_select(
            ["tenant", "session_id", "event_id", "group_id", "action"],
            select(*keys, links.c.group_id, links.c.action),
        )
        .cte("written_links")
    )
    written = session_update.add_cte(event).add_cte(linked)
    for index, statement in enumerate(also):
        written = written.add_cte(statement.cte(f"written_rows_{index}"))
    return written


async def write_event_and_session(
    conn: AsyncConnection,
    event: CompactionEvent,
    session_update: Update,
    session_params: Mapping[str, Any],
    *,
    tenant: str,
    session_id: str,
    number: int,
    revision: int,
    also: Sequence[tuple[UpdateBase, Mapping[str, Any]]] = (),
) -> None:
    """:func:`write_event`, then ``session_update`` of the session row with
    ``session_params`` (and ``also``, statements writing other tables with their
    parameters, none of whose names they share with the others but the session key's):
    one statement where the database runs data-modifying ``WITH`` queries (one round
    trip instead of three or four), else one after the other."""
    if not dialect.of(conn).data_modifying_ctes:
        for statement, bound in also:
            await conn.execute(statement, bound)
        await write_event(conn, tenant, session_id, event, number=number, revision=revision)
        await conn.execute(session_update, session_params)
        return
    values = event_values(tenant, session_id, event, number=number, revision=revision)
    values["params"] = values.pop("params_json")
    links = link_rows(event)
    params = {_EVENT_PREFIX + name: value for name, value in values.items()}
    params.update(
        session_params,
        link_groups=[group_id for group_id, _ in links],
        link_actions=[action for _, action in links],
    )
    for _, bound in also:
        params.update(bound)
    await conn.execute(_with_event(session_update, tuple(s for s, _ in also)), params)


async def record_event(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    before: RowMapping,
    *,
    event_id: str,
    strategy: str,
    params: dict[str, Any],
    now: datetime,
    phase: Phase = "manual",
) -> CompactionEvent:
    """Audit a write made outside a change set (a redaction, a repair, a rewind) as an
    event of ``phase``: ``before`` is the session row before the write, which is read
    again for the counts after; the session's event count is bumped."""
    after = await read_session(conn, tenant, session_id)
    event = CompactionEvent(
        id=event_id,
        session_id=session_id,
        tenant=tenant,
        phase=phase,
        strategy=strategy,
        params=params,
        messages_before=before["active_messages"],
        messages_after=after["active_messages"],
        groups_before=before["active_groups"],
        groups_after=after["active_groups"],
        tokens_before=before["active_tokens"],
        tokens_after=after["active_tokens"],
        created_at=now,
    )
    await write_event(
        conn, tenant, session_id, event, number=after["event_count"] + 1, revision=after["revision"]
    )
    await conn.execute(
        update(SESSIONS)
        .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
        .values(event_count=SESSIONS.c.event_count + 1)
    )
    log_event(event)
    return event
