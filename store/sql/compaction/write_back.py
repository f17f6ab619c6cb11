"""Writing back what the shared rules changed in a mirror, its audit event recorded.

The rules live once, in :mod:`store.rules.changes` (pure functions over records). A
write loads the few records a change set or restore can touch
(:mod:`~store.sql.compaction.mirror`), runs those functions on them, then
:func:`write_back` writes what changed and the session's aggregates, and records the
audit event with its links to groups (:func:`store.sql.audit.write_event`), in the
caller's write transaction; the texts it stores (a
summary's contents and metadata, a reduced version) are encoded by
:mod:`store.sql.codec`. The :class:`~store.sql.compaction.mirror.Written` it returns
carries the rows the write left, as a read would return them, so that the store's cache
of active views moves on without reading those groups again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    JSON,
    Table,
    Text,
    Update,
    bindparam,
    cast,
    func,
    literal_column,
    null,
    select,
)
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import UpdateBase

from store.models import CompactionEvent, Phase
from store.rules.changes import Outcome, build_event, log_event
from store.rules.records import GroupRecord
from store.sql import dialect
from store.sql.audit import write_event, write_event_and_session
from store.sql.branches.sharing import keep_for_readers, set_own_state
from store.sql.codec import ENCODED, encode_reduced
from store.sql.compaction.mirror import Mirror, Written, mirror_of
from store.sql.mapping import INSERT_MESSAGE, inserted_message, message_to_values
from store.sql.schema import GROUPS, MESSAGES
from store.sql.statements import (
    EACH_KEY,
    among_params,
    chunks,
    each_params,
    key_params,
    session_update,
    update_among,
    update_each,
)
from strategies.messages import Message
from strategies.view import Totals

__all__ = ["GROUP_SETS", "Planned", "plan_write_back", "rows_json", "write_back", "write_outcome"]


@dataclass
class _Delta:
    messages: int = 0
    groups: int = 0
    tokens: int = 0
    stored_messages: int = 0
    stored_groups: int = 0
    stored_tokens: int = 0
    group_tokens: dict[str, int] = field(default_factory=dict)


# a group's exclusion (excluded, reason, event id), then its summarized_by and pinned
_State = tuple[bool, str | None, str | None]
_Links = tuple[bool, str | None, str | None, str | None, bool]
_LINK_COLUMNS = ("excluded", "excluded_reason", "excluded_event_id", "summarized_by", "pinned")
_KEY = EACH_KEY


@dataclass
class _Plan:
    """What a write-back changes, gathered first, then written a few statements at a time.

    Message rows that take the same values are updated together (see
    :func:`_update_among`; on SQLite each row by an executemany); rows that each take
    their own, by one statement executed once per row (an executemany, which SQLite
    runs in a loop in C and asyncpg pipelines). Group rows, changed and inserted, go in
    one upsert (:func:`_write_groups`).
    """

    unreduced: set[str] = field(default_factory=set)
    """Ids of the messages whose reduction is dropped."""
    reduced: list[dict[str, Any]] = field(default_factory=list)
    """Messages given a reduction."""
    exclusions: dict[_State, set[str]] = field(default_factory=dict)
    """Group ids by their messages' new exclusion."""
    links: dict[_Links, set[str]] = field(default_factory=dict)
    """Group ids by their new values, for groups whose token count is unchanged."""
    recounted: list[dict[str, Any]] = field(default_factory=list)
    """Groups whose token count changed."""
    summary_groups: list[dict[str, Any]] = field(default_factory=list)
    summary_messages: list[dict[str, Any]] = field(default_factory=list)
    group_rows: list[dict[str, Any]] = field(default_factory=list)
    """The whole rows of the groups upserted (see :func:`_group_rows`)."""
    also: list[tuple[UpdateBase, dict[str, Any]]] = field(default_factory=list)
    """Writes, with their parameters, left to the statement that writes the event and
    the session row (:func:`~store.sql.audit.write_event_and_session`): the one
    exclusion's ``UPDATE`` of the messages, the groups' upsert."""


def _plan_rows(mirror: Mirror, out: Outcome, plan: _Plan, delta: _Delta) -> None:
    s = mirror.session
    for message_id, row in s.rows.items():
        before = mirror.original_rows.get(message_id)
        if before is None or row.reduced_event == before.reduced_event:
            continue
        if row.reduced is None:
            plan.unreduced.add(message_id)
        else:
            plan.reduced.append(
                {
                    _KEY: message_id,
                    "reduced_json": encode_reduced(s.tenant, s.session_id, row.seq, row.reduced),
                    "reduced_token_count": row.reduced_tokens,
                    "reduced_event_id": out.event_id,
                }
            )
        change = row.effective_tokens - before.effective_tokens
        delta.group_tokens[row.group_id] = delta.group_tokens.get(row.group_id, 0) + change


def _plan_group(mirror: Mirror, group: GroupRecord, plan: _Plan, delta: _Delta) -> None:
    before = mirror.original[group.group_id]
    count, tokens = mirror.counts[group.group_id]
    change = delta.group_tokens.get(group.group_id, 0)
    state: _State = (group.excluded, group.reason, group.event_id)
    moved = state != (before.excluded, before.reason, before.event_id)
    if moved:
        plan.exclusions.setdefault(state, set()).add(group.group_id)
    links: _Links = (*state, group.summarized_by, group.pinned)
    if change:
        values = dict(zip(_LINK_COLUMNS, links, strict=True))
        plan.recounted.append({_KEY: group.group_id, **values, "token_count": tokens + change})
    elif moved or links[3:] != (before.summarized_by, before.pinned):
        # its token count stays the one loaded, which is the stored one (the session is locked)
        plan.links.setdefault(links, set()).add(group.group_id)
    was, now_active = int(not before.excluded), int(not group.excluded)
    delta.groups += now_active - was
    delta.messages += (now_active - was) * count
    delta.tokens += now_active * (tokens + change) - was * tokens


def _plan_summary(
    mirror: Mirror, group: GroupRecord, now: datetime, plan: _Plan, delta: _Delta
) -> None:
    s = mirror.session
    row = s.rows[group.message_ids[0]]
    base = {"tenant": s.tenant, "session_id": s.session_id}
    plan.summary_groups.append(
        {
            **base,
            "group_id": group.group_id,
            "kind": "summary",
            "turn": group.turn,
            "anchor": group.anchor,
            "slot": group.slot,
            "first_seq": row.seq,
            "first_position": -1,
            "message_count": 1,
            "token_count": row.tokens,
            "pinned": group.pinned,
            "excluded": group.excluded,
            "excluded_reason": group.reason,
            "excluded_event_id": group.event_id,
            "summarized_by": group.summarized_by,
            "summary_of": list(group.summary_of),
            "created_at": now,
        }
    )
    plan.summary_messages.append(
        {
            **base,
            "seq": row.seq,
            "anchor": row.anchor,
            "slot": row.slot,
            **message_to_values(row.message, tenant=s.tenant, session_id=s.session_id, seq=row.seq),
            "stored_at": now,
            "group_id": group.group_id,
            "group_kind": "summary",
            "token_count": row.tokens,
            "excluded": group.excluded,
            "excluded_reason": group.reason,
            "excluded_event_id": group.event_id,
        }
    )
    delta.stored_messages += 1
    delta.stored_groups += 1
    delta.stored_tokens += row.tokens
    if not group.excluded:
        delta.messages += 1
        delta.groups += 1
        delta.tokens += row.tokens


def _among(
    conn: AsyncConnection,
    mirror: Mirror,
    table: str,
    column: str,
    ids: set[str],
    values: Mapping[str, Any],
) -> tuple[Update, dict[str, Any]]:
    """The ``UPDATE`` giving ``values`` to every row whose ``column`` is in ``ids`` (a
    non-empty set), and its parameters, where the database binds a list as one array."""
    statement, params = update_among(conn, table, column, values)
    keys = {**key_params(mirror.session.tenant, mirror.session.session_id), **params}
    (bound,) = among_params(conn, keys, list(ids))
    return statement, bound


async def _update_among(
    conn: AsyncConnection,
    mirror: Mirror,
    table: str,
    column: str,
    ids: set[str],
    values: Mapping[str, Any],
) -> None:
    """Give the same ``values`` to every row whose ``column`` is in ``ids``."""
    if not ids:  # building the statement costs more than a turn's other writes
        return
    statement, params = update_among(conn, table, column, values)
    keys = {**key_params(mirror.session.tenant, mirror.session.session_id), **params}
    for bound in among_params(conn, keys, list(ids)):
        await conn.execute(statement, bound)


async def _update_each(
    conn: AsyncConnection, mirror: Mirror, table: str, column: str, rows: list[dict[str, Any]]
) -> None:
    """Give each row named in ``rows`` its own values: one statement, run once per row."""
    if rows:
        s = mirror.session
        await conn.execute(update_each(table, column), each_params(s.tenant, s.session_id, rows))


def _each(by_values: Mapping[tuple[Any, ...], set[str]], width: int) -> list[dict[str, Any]]:
    """One parameter set per group id of ``by_values`` (the first ``width`` link columns)."""
    columns = _LINK_COLUMNS[:width]
    return [
        {_KEY: group_id, **dict(zip(columns, values, strict=True))}
        for values, ids in by_values.items()
        for group_id in sorted(ids)
    ]


async def _write_inherited(conn: AsyncConnection, mirror: Mirror, plan: _Plan) -> None:
    """A fork's reductions of rows it inherits: kept as its own state of them (and taken
    out of ``plan``, which then names its own rows only)."""
    s, inherited = mirror.session, mirror.inherited
    if not inherited:
        return
    cleared = {"reduced_contents": None, "reduced_token_count": None, "reduced_event_id": None}

    def place(message_id: str) -> dict[tuple[str, int], dict[str, Any]]:
        return {inherited[message_id]: {"group_id": s.rows[message_id].group_id, **cleared}}

    for message_id in sorted(plan.unreduced & set(inherited)):
        await set_own_state(conn, s.tenant, s.session_id, place(message_id), cleared)
    for reduced in [r for r in plan.reduced if r[_KEY] in inherited]:
        values = {
            "reduced_contents": reduced["reduced_json"],
            "reduced_token_count": reduced["reduced_token_count"],
            "reduced_event_id": reduced["reduced_event_id"],
        }
        await set_own_state(conn, s.tenant, s.session_id, place(reduced[_KEY]), values)
    plan.unreduced -= set(inherited)
    plan.reduced = [r for r in plan.reduced if r[_KEY] not in inherited]


async def _write(conn: AsyncConnection, mirror: Mirror, plan: _Plan) -> None:
    await _write_inherited(conn, mirror, plan)
    changed = plan.unreduced | {r[_KEY] for r in plan.reduced}
    if changed:  # the branches that read these rows keep what they read
        s = mirror.session
        for part in chunks(sorted(changed)):
            condition = MESSAGES.c.message_id.in_(part)
            await keep_for_readers(conn, s.tenant, mirror.row, condition)
    cleared = {"reduced_contents": null(), "reduced_token_count": None, "reduced_event_id": None}
    await _update_among(conn, mirror, "messages", "message_id", plan.unreduced, cleared)
    if plan.reduced:
        s = mirror.session
        await conn.execute(_REDUCE, each_params(s.tenant, s.session_id, plan.reduced))
    if dialect.of(conn).row_by_row_updates:
        # one executemany, each row found by index (SQLite loops in C): fewer statements
        # than one UPDATE per distinct set of values
        await _update_each(conn, mirror, "messages", "group_id", _each(plan.exclusions, 3))
    elif (
        len(plan.exclusions) == 1
        and all(plan.exclusions.values())
        and dialect.of(conn).data_modifying_ctes
    ):
        # the one exclusion's update goes with the event and the session row
        ((state, ids),) = plan.exclusions.items()
        values = dict(zip(_LINK_COLUMNS[:3], state, strict=True))
        plan.also.append(_among(conn, mirror, "messages", "group_id", ids, values))
    else:
        for state, ids in plan.exclusions.items():
            values = dict(zip(_LINK_COLUMNS[:3], state, strict=True))
            await _update_among(conn, mirror, "messages", "group_id", ids, values)
    await _write_groups(conn, plan)
    for part in chunks(plan.summary_messages):
        await conn.execute(INSERT_MESSAGE, list(part))


_REDUCE = update_each("messages", "message_id").values(
    reduced_contents=bindparam("reduced_json", type_=ENCODED)
)
"""Give each message row named its reduced version (bound as ``reduced_json``, encoded),
its token count and event: one statement, run once per row."""


_GROUP_COLUMNS = tuple(c.key for c in GROUPS.c)
GROUP_SETS = (*_LINK_COLUMNS, "token_count", "written_revision")
"""What a write-back changes in a stored group row."""


@cache
def _group_upsert(insert: Callable[[Table], Any]) -> Any:
    """An ``INSERT`` of whole group rows that, for a stored group, sets :data:`GROUP_SETS`."""
    statement = insert(GROUPS)
    return statement.on_conflict_do_update(
        index_elements=[GROUPS.c.tenant, GROUPS.c.session_id, GROUPS.c.group_id],
        set_={name: statement.excluded[name] for name in GROUP_SETS},
    )


@cache
def _groups_from_json(insert: Callable[[Table], Any]) -> Any:
    """:func:`_group_upsert` of the rows of one JSON array of whole group rows (bound as
    ``group_rows``), read by ``json_populate_recordset`` as rows of the groups' table:
    one statement for any number of rows, to go in a ``WITH``."""
    names = [c.key for c in GROUPS.c]
    rows = func.json_populate_recordset(
        literal_column(f"NULL::{GROUPS.name}"), cast(bindparam("group_rows", type_=Text()), JSON)
    ).table_valued(*names)
    statement = insert(GROUPS).from_select(names, select(*(rows.c[name] for name in names)))
    return statement.on_conflict_do_update(
        index_elements=[GROUPS.c.tenant, GROUPS.c.session_id, GROUPS.c.group_id],
        set_={name: statement.excluded[name] for name in GROUP_SETS},
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.isoformat()
    raise TypeError(f"no JSON for a {type(value).__name__}")  # pragma: no cover


def rows_json(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The parameter of :func:`_groups_from_json` for whole group ``rows`` (``group_rows``:
    one JSON array, read by ``json_populate_recordset`` as rows of the groups' table)."""
    return {"group_rows": json.dumps(rows, default=_json_value, separators=(",", ":"))}


def _whole(base: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A whole group row: ``values`` where given, else ``base``'s."""
    return {name: values[name] if name in values else base[name] for name in _GROUP_COLUMNS}


def _group_rows(mirror: Mirror, plan: _Plan, revision: int) -> list[dict[str, Any]]:
    """The whole rows of the groups whose links or token count changed (each stored
    group's row as loaded, with its new values), then the summaries', each written at
    ``revision``."""
    loaded = mirror.loaded
    rows: list[dict[str, Any]] = []
    stamp = {"written_revision": revision}
    for links, ids in plan.links.items():
        values = {**dict(zip(_LINK_COLUMNS, links, strict=True)), **stamp}
        rows.extend(_whole(loaded[group_id], values) for group_id in sorted(ids))
    rows.extend(_whole(loaded[r[_KEY]], {**r, **stamp}) for r in plan.recounted)
    rows.extend(_whole(_GROUP_DEFAULTS, {**values, **stamp}) for values in plan.summary_groups)
    return rows


async def _write_groups(conn: AsyncConnection, plan: _Plan) -> None:
    """The groups whose links or token count changed and the summaries inserted, in
    one statement: an upsert of whole rows (:func:`_group_rows`), whatever the number
    of distinct values. Where the database runs data-modifying ``WITH`` queries, the
    upsert takes its rows from one JSON parameter and goes with the event's statement
    (``plan.also``)."""
    rows = plan.group_rows
    if rows and dialect.of(conn).data_modifying_ctes:
        plan.also.append((_groups_from_json(dialect.of(conn).insert), rows_json(rows)))
        return
    statement = _group_upsert(dialect.of(conn).insert)
    for part in chunks(rows):
        await conn.execute(statement, list(part))


_SESSION_AFTER_WRITE, _SESSION_AFTER_CHAINED_WRITE = (
    session_update(
        ("next_seq", "updated_at", "active_messages", "active_groups", "active_tokens"),
        ("stored_messages", "stored_groups", "stored_tokens"),
        counters=("event_count",),
        chained=chained,
    )
    for chained in (False, True)
)
"""The session row after a write-back: aggregates, revision, event count (and, for a
write that leaves every group's messages as they were unless it changes its row, the
session's write chain)."""


@dataclass(frozen=True)
class Planned:
    """What a write-back writes, planned from the mirror before any statement runs."""

    plan: _Plan
    event: CompactionEvent
    session_params: dict[str, Any]
    """The parameters of the session row's update (:data:`_SESSION_AFTER_WRITE`)."""
    number: int
    """The event's number in the session."""
    revision: int
    """The session's revision after the write."""


def plan_write_back(
    mirror: Mirror, out: Outcome, *, phase: Phase, strategy: str, params: dict[str, Any]
) -> Planned:
    """Plan the write of what ``out`` changed in the mirror, with its audit event (and
    set ``mirror.written``, the rows the write leaves); nothing is written."""
    delta = _Delta()
    plan = _Plan()
    _plan_rows(mirror, out, plan, delta)
    for group in mirror.session.groups.values():
        if group.group_id in mirror.original:
            _plan_group(mirror, group, plan, delta)
        else:
            _plan_summary(mirror, group, out.now, plan, delta)
    row = mirror.row
    plan.group_rows = _group_rows(mirror, plan, row["revision"] + 1)
    after = Totals(
        messages=row["active_messages"] + delta.messages,
        groups=row["active_groups"] + delta.groups,
        tokens=row["active_tokens"] + delta.tokens,
    )
    mirror.written = written(
        mirror.loaded,
        mirror.session.groups,
        {r[_KEY]: r["token_count"] for r in plan.recounted},
        plan.summary_groups,
        plan.summary_messages,
        Totals(
            messages=row["stored_messages"] + delta.stored_messages - after.messages,
            groups=row["stored_groups"] + delta.stored_groups - after.groups,
            tokens=row["stored_tokens"] + delta.stored_tokens - after.tokens,
        ),
    )
    rows_after = mirror.written.groups
    for written_row in plan.group_rows:  # their rows as a read would return them now
        group_id = written_row["group_id"]
        rows_after[group_id] = {**rows_after[group_id], "written_revision": row["revision"] + 1}
    event = build_event(mirror.session, out, after, phase=phase, strategy=strategy, params=params)
    s = mirror.session
    session_params = {
        **key_params(s.tenant, s.session_id),
        "v_next_seq": s.next_seq,
        "v_updated_at": out.now,
        "d_stored_messages": delta.stored_messages,
        "d_stored_groups": delta.stored_groups,
        "d_stored_tokens": delta.stored_tokens,
        "v_active_messages": after.messages,
        "v_active_groups": after.groups,
        "v_active_tokens": after.tokens,
    }
    return Planned(plan, event, session_params, row["event_count"] + 1, row["revision"] + 1)


async def write_back(
    conn: AsyncConnection,
    mirror: Mirror,
    out: Outcome,
    *,
    phase: Phase,
    strategy: str,
    params: dict[str, Any],
    chained: bool = False,
) -> CompactionEvent:
    """Write what ``out`` changed in the mirror, with its audit event; return the event.
    ``chained``: the change left every group's messages as they were unless it changed
    the group's row (no reductions, no restore), and extends the session's write chain
    (:data:`~store.sql.statements.CHAINED`)."""
    planned = plan_write_back(mirror, out, phase=phase, strategy=strategy, params=params)
    plan = planned.plan
    await _write(conn, mirror, plan)
    s = mirror.session
    await write_event_and_session(
        conn,
        planned.event,
        _SESSION_AFTER_CHAINED_WRITE if chained else _SESSION_AFTER_WRITE,
        planned.session_params,
        tenant=s.tenant,
        session_id=s.session_id,
        number=planned.number,
        revision=planned.revision,
        also=plan.also,
    )
    log_event(planned.event)
    return planned.event


_EVENT_COUNTED = session_update((), (), counters=("event_count",), revision=False)
"""The session row after recording an outcome that changed nothing: one more event."""


async def write_outcome(
    conn: AsyncConnection,
    session: RowMapping,
    out: Outcome,
    totals: Totals,
    *,
    phase: Phase,
    strategy: str,
    params: dict[str, Any],
) -> CompactionEvent:
    """Write the event of a compaction that changed nothing (``out.result`` says why);
    the session's revision and aggregates stay as they are."""
    record = mirror_of(session).session
    event = build_event(record, out, totals, phase=phase, strategy=strategy, params=params)
    await write_event(
        conn,
        record.tenant,
        record.session_id,
        event,
        number=session["event_count"] + 1,
        revision=session["revision"],
    )
    await conn.execute(_EVENT_COUNTED, key_params(record.tenant, record.session_id))
    log_event(event)
    return event


_GROUP_DEFAULTS = {"has_reasoning": False, "pending_calls": 0, "orphan": False}
"""The group columns a summary's insert leaves to their server defaults."""


def written(
    loaded: Mapping[str, Mapping[Any, Any]],
    groups: Mapping[str, GroupRecord],
    token_counts: Mapping[str, int],
    summary_groups: Iterable[Mapping[str, Any]],
    summary_messages: Iterable[Mapping[str, Any]],
    excluded: Totals,
) -> Written:
    """The rows of the ``loaded`` groups with their new state, and the summaries' rows.

    ``token_counts`` holds the groups whose token count the write changed.
    """
    rows: dict[str, Mapping[str, Any]] = {}
    for group_id, before in loaded.items():
        group = groups[group_id]
        row = dict(before)
        row.update(
            excluded=group.excluded,
            excluded_reason=group.reason,
            excluded_event_id=group.event_id,
            summarized_by=group.summarized_by,
            pinned=group.pinned,
        )
        if group_id in token_counts:
            row["token_count"] = token_counts[group_id]
        rows[group_id] = row
    for values in summary_groups:
        rows[values["group_id"]] = {**_GROUP_DEFAULTS, **values}
    messages: dict[str, list[tuple[int, Message]]] = {}
    for values in summary_messages:
        if not values["excluded"]:
            pairs = messages.setdefault(values["group_id"], [])
            pairs.append((values["seq"], inserted_message(values)))
    shown = {gid: tuple(sorted(pairs, key=lambda p: p[0])) for gid, pairs in messages.items()}
    return Written(rows, shown, excluded)
