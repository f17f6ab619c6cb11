"""A compaction's write-back in one statement, where the database runs data-modifying
``WITH`` queries (PostgreSQL), on a connection in autocommit.

The transactional write-back (:meth:`~store.sql.compaction.compactor.Compactor.apply`)
is ``BEGIN``, the session row locked with the groups the change set touches, one
statement for the event, the groups and the session row, a second for a summary's
message, ``COMMIT``: five round trips, the session locked across four of them. Here:

1. one statement reads what the locked read reads (the session row, the touched groups
   and every group at their anchors, how many of the summaries' ids are taken), as of
   its own snapshot, locking nothing
   (:func:`~store.sql.compaction.mirror.lock_with_groups` with ``lock=False``), or,
   where no other writer moved the session since the plan's snapshot, nothing is read:
   the snapshot's rows are the mirror's (its active groups only: the gate then also
   asks that no group it lacks be at a summary's anchor at or after its slot);
2. when another writer wrote since the plan's snapshot, what of the plan still applies
   to the groups as read is kept (:func:`~store.rules.conflicts.still_valid`, as under
   the lock); the shared rules apply it to the mirror and the write is planned
   (:func:`~store.sql.compaction.write_back.plan_write_back`), as under the lock;
3. one statement writes it all, every part a ``WITH`` query gated by the first: the
   session row's ``UPDATE`` where its cache key (incarnation, revision) is still the
   one read, or where every write since was of the session's write chain and none of
   them wrote a group the plan read (each sets the ``written_revision`` of the group
   rows it writes): the plan then applies to the groups as they are, and lands after
   those writes, as an append does (its summaries' messages after theirs, its counts
   added to the row as found, its event numbered and totalled from the row as
   written). The ``UPDATE`` holds the row lock for that statement alone, and every
   other writer takes that row first.

:func:`write_back_in_one_statement` gives None, having written nothing, when the
transactional write-back should do the work: a change set that reduces messages (their
rows are loaded and kept for the forks that read them), a stored text too large for
one statement, or a gate that did not hold (another writer wrote a group the plan read,
or wrote off the chain, between the read and the statement: the transactional apply
reads again under the lock, and keeps what of the plan still applies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import JSON, Column
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from store.models import CompactionEvent, Phase
from store.rules.changes import Outcome, log_event
from store.sql.append.inserts import DriverInsert, holds_large_text, message_insert
from store.sql.audit import INSERT_EVENT, event_values, link_rows
from store.sql.codec import sealing_now
from store.sql.compaction.mirror import Mirror
from store.sql.compaction.write_back import GROUP_SETS, plan_write_back, rows_json
from store.sql.dialect import kept_on
from store.sql.driver_sql import Parameters, rows_of, sql_type
from store.sql.schema import EVENT_GROUPS, EVENTS, GROUPS, MESSAGES, SESSIONS
from store.sql.statements import CHAINED

__all__ = ["MOVED", "Moved", "write_back_in_one_statement"]


class Moved:
    """What the one statement gives when its gate did not hold: another writer wrote a
    group the plan read, or wrote off the write chain, since the read."""


MOVED = Moved()

_GATE: Final = "EXISTS (SELECT FROM written_session)"
_SET: Final = ("updated_at",)
"""The session row's columns the write sets (``v_<column>``)."""
_ADDED: Final = ("stored_messages", "stored_groups", "stored_tokens")
"""The session row's columns the write adds to (``d_<column>``)."""
_MOVED: Final = ("next_seq", "active_messages", "active_groups", "active_tokens")
"""The session row's columns the plan sets (``v_<column>``), written as what it adds
to the row as read (``d_<column>``), so that a write landing after others' adds to
theirs."""
_TOTALS: Final = ("messages", "groups", "tokens")
_ATTEMPTS: Final = 3
"""How often the statement is sent while a commit after its snapshot is what stopped it
(see :func:`_write`), before the transactional write-back takes over."""
_EXCLUSION: Final = ("group_id", "excluded", "excluded_reason", "excluded_event_id")
_EVENT_COLUMN: Final = {"params_json": "params"}
"""The event table's column of each event parameter named otherwise."""
_MESSAGE_DEFAULTS: Final = {"source_system": None, "source_id": None, "imported_at": None}
"""The message parameters a summary's row leaves empty."""


@dataclass(frozen=True, slots=True)
class _Statement:
    sql: str
    names: tuple[str, ...]
    event: DriverInsert
    """The event's parameters, in order, and their bind processors."""
    messages: DriverInsert
    """A summary message's parameters, in order, and their bind processors."""


def _statement(dialect: Dialect) -> _Statement:
    return kept_on(dialect, "one_statement_compaction", lambda: _write(dialect))


def _scalar(bind: Parameters, name: str, column: Column[Any], dialect: Dialect) -> str:
    """One parameter of ``column``'s type (a JSON column's is the encoded text)."""
    target = sql_type(column, dialect)
    if isinstance(column.type, JSON):
        return f"CAST({bind(name, 'text')} AS {target})"
    return bind(name, target)


def _write(dialect: Dialect) -> _Statement:
    """The write-back's one statement for ``dialect``, its parameters named.

    The session row's ``UPDATE`` is the gate, and every other part writes only where it
    did. It writes where the session's incarnation and revision are those the read
    found or, for a plan that may land after other writers' writes (``rebase``: a
    root, nothing sealed at a ``seq``), where every write since was of the session's
    write chain and none wrote a group the plan read (its ``written_revision``, by id or
    at the anchors of the groups read: the summaries' places). What the plan adds to
    the session's counters is added to the row as found; its summaries' messages take
    their ``seq`` after the messages appended since (``w.seq_shift``), the event its
    number, revision and totals from the row as written.

    A statement that waited for another writer's lock sees the session row as that
    writer left it, but the groups as its snapshot saw them: landing after needs the
    snapshot's revision to be the row's. The statement gives the revision it wrote
    (null when it wrote nothing), the event's number and totals, and ``again``:
    whether the gate held as its snapshot saw the session, so that a commit after the
    snapshot is what stopped it and the same statement sent again may write.
    """
    bind = Parameters()
    tenant, session_id = bind("w_tenant", "text"), bind("w_session_id", "text")
    keyed = f"tenant = {tenant} AND session_id = {session_id}"
    s = SESSIONS.c
    moved = {name: bind("d_" + name, "bigint") for name in _MOVED}
    sets = [f"{name} = {bind('v_' + name, sql_type(s[name], dialect))}" for name in _SET]
    sets += [f"{name} = {name} + {bind('d_' + name, 'bigint')}" for name in _ADDED]
    sets += [f"{name} = {name} + {value}" for name, value in moved.items()]
    sets += [f"{name} = {value}" for name, value in CHAINED.items()]
    revision = bind("revision", "bigint")
    read_groups, read_anchors = bind("read_groups", "text[]"), bind("read_anchors", "bigint[]")
    # an excluded group at a summary's anchor at or after its slot, where the mirror
    # holds the active groups alone (an active group it lacks was written since: the
    # revision tells): one look into the groups' (excluded, anchor, slot) index a
    # summary (as a filter over an array, planned on guesses, it read every excluded
    # group of the session); first the array's size, so that without one the groups
    # are not looked at
    unseen = bind("unseen_anchors", "bigint[]")
    gate = f"""incarnation IS NOT DISTINCT FROM {bind("incarnation", "text")}
    AND (cardinality({unseen}) = 0 OR NOT EXISTS (
      SELECT FROM unnest({unseen}, {bind("unseen_slots", "integer[]")}) AS u(anchor, slot),
      LATERAL (
        SELECT FROM {GROUPS.name} AS g
        WHERE g.tenant = {tenant} AND g.session_id = {session_id}
          AND g.excluded AND g.anchor = u.anchor AND g.slot >= u.slot LIMIT 1) AS found))
    AND (revision = {revision} OR (
      {bind("rebase", "boolean")} AND branch IS NULL
      AND chain_revision = revision AND chain_since <= {revision}
      AND NOT EXISTS (SELECT FROM {GROUPS.name} AS g
        WHERE g.tenant = {tenant} AND g.session_id = {session_id}
          AND g.written_revision > {revision}
          AND (g.group_id = ANY({read_groups}) OR g.anchor = ANY({read_anchors})))
    ))"""
    event = DriverInsert.compile(INSERT_EVENT, _event_parameters(), dialect)
    event_columns = [_EVENT_COLUMN.get(name, name) for name in event.columns]
    # the event's number, revision and totals as the row is written
    written = {"number": "w.event_count", "revision": "w.revision"}
    for total in _TOTALS:
        written[f"{total}_after"] = f"w.active_{total}"
        written[f"{total}_before"] = f"w.active_{total} - {moved['active_' + total]}"
    event_values = [
        written[name] if name in written else _scalar(bind, "e_" + name, EVENTS.c[column], dialect)
        for name, column in zip(event.columns, event_columns, strict=True)
    ]
    event_id = event_values[event.columns.index("event_id")]
    links = f"unnest({bind('link_groups', 'text[]')}, {bind('link_actions', 'text[]')})"
    excluded_groups = bind("x_group_id", "text[]")
    exclusions = (
        f"unnest({excluded_groups}, {bind('x_excluded', 'boolean[]')},"
        f" {bind('x_excluded_reason', 'text[]')}, {bind('x_excluded_event_id', 'text[]')})"
    )
    group_columns = [c.key for c in GROUPS.c]
    group_values = {
        # a summary's first message is its own, moved as its seq is
        "first_seq": "CASE WHEN r.kind = 'summary' THEN r.first_seq + w.seq_shift"
        " ELSE r.first_seq END",
        "written_revision": "w.revision",
    }
    messages = message_insert(dialect)
    message_rows = rows_of(
        MESSAGES, messages.table_columns, "m_", bind, dialect, {"seq": "seq_shift"}
    )
    read_next_seq = bind("read_next_seq", "bigint")
    sql = f"""WITH written_session AS (
  UPDATE {SESSIONS.name} SET {", ".join(sets)},
    event_count = event_count + 1, revision = revision + 1
  WHERE {keyed} AND {gate}
    AND (revision = {revision} OR revision = (
      SELECT seen.revision FROM {SESSIONS.name} AS seen
      WHERE seen.tenant = {tenant} AND seen.session_id = {session_id}
    ))
  RETURNING revision, event_count, active_messages, active_groups, active_tokens,
    next_seq - {moved["next_seq"]} - {read_next_seq} AS seq_shift
), written_event AS (
  INSERT INTO {EVENTS.name} ({", ".join(event_columns)})
  SELECT {", ".join(event_values)} FROM written_session AS w
), written_links AS (
  INSERT INTO {EVENT_GROUPS.name} (tenant, session_id, event_id, group_id, action)
  SELECT {tenant}, {session_id}, {event_id}, u.group_id, u.action
  FROM {links} AS u(group_id, action) WHERE {_GATE}
), excluded_messages AS (
  UPDATE {MESSAGES.name} AS m SET
    {", ".join(f"{name} = u.{name}" for name in _EXCLUSION[1:])}
  FROM {exclusions} AS u({", ".join(_EXCLUSION)})
  WHERE m.tenant = {tenant} AND m.session_id = {session_id}
    AND m.group_id = ANY({excluded_groups}) AND m.group_id = u.group_id AND {_GATE}
), written_groups AS (
  INSERT INTO {GROUPS.name} ({", ".join(group_columns)})
  SELECT {", ".join(group_values.get(name, f"r.{name}") for name in group_columns)}
  FROM json_populate_recordset(NULL::{GROUPS.name}, {bind("group_rows", "json")}) AS r
  CROSS JOIN written_session AS w
  ON CONFLICT (tenant, session_id, group_id)
  DO UPDATE SET {", ".join(f"{name} = excluded.{name}" for name in GROUP_SETS)}
), written_messages AS (
  INSERT INTO {MESSAGES.name} ({", ".join(messages.table_columns)})
  {message_rows}
)
SELECT w.revision AS written, w.event_count AS number, w.active_messages,
  w.active_groups, w.active_tokens,
  EXISTS (SELECT FROM {SESSIONS.name} WHERE {keyed} AND {gate}) AS again
FROM (SELECT 1) AS one LEFT JOIN written_session AS w ON true"""
    return _Statement(sql, tuple(bind.names), event, messages)


def _event_parameters() -> tuple[str, ...]:
    """The parameters of :data:`~store.sql.audit.INSERT_EVENT`, in the table's order."""
    return tuple("params_json" if c.key == "params" else c.key for c in EVENTS.c)


def _places(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """Each summary's ``(anchor, slot)``, in order."""
    return sorted({(int(g["anchor"]), int(g["slot"])) for g in summaries})


def _columns(
    prefix: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, list[Any]]:
    """One array parameter a column of ``rows`` (named ``prefix`` + column)."""
    columns: list[list[Any]] = [[] for _ in names]
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return {prefix + name: column for name, column in zip(names, columns, strict=True)}


async def write_back_in_one_statement(
    conn: AsyncConnection,
    mirror: Mirror,
    out: Outcome,
    *,
    phase: Phase,
    strategy: str,
    params: dict[str, Any],
    unseen: bool = False,
) -> tuple[CompactionEvent, bool] | Moved | None:
    """Write what ``out`` changed in ``mirror`` (read without a lock), with its audit
    event, in one statement on ``conn``, a connection in autocommit: the event as
    written and whether the write landed after other writers' (the rows ``mirror``
    holds as written are then not the session's at the revision after the one read);
    :data:`MOVED`, having written nothing, when the gate did not hold; None, having
    written nothing, when the transactional write-back should write (see the module).
    The write extends the session's write chain (:data:`~store.sql.statements.CHAINED`):
    it reduces nothing.

    ``unseen``: ``mirror`` holds the active groups alone at the anchors of the groups
    it holds (it was made from a snapshot of the active view, not read): the gate then
    also asks that no excluded group be at a summary's anchor at or after its slot (the
    summary's slot follows every group's there)."""
    planned = plan_write_back(mirror, out, phase=phase, strategy=strategy, params=params)
    plan = planned.plan
    if plan.unreduced or plan.reduced:
        return None
    statement = _statement(conn.dialect)
    messages = [
        statement.messages.row({**_MESSAGE_DEFAULTS, **values}) for values in plan.summary_messages
    ]
    if messages and holds_large_text(messages, statement.messages.texts):
        return None
    s, event, row = mirror.session, planned.event, mirror.row
    values = event_values(
        s.tenant, s.session_id, event, number=planned.number, revision=planned.revision
    )
    links = link_rows(event)
    exclusions = [
        (group_id, *state) for state, ids in plan.exclusions.items() for group_id in sorted(ids)
    ]
    session_params = planned.session_params
    bound: dict[str, Any] = {
        **session_params,
        **{"d_" + name: session_params["v_" + name] - row[name] for name in _MOVED},
        "incarnation": row["incarnation"],
        "revision": row["revision"],
        "read_next_seq": row["next_seq"],
        # a sealed summary binds its seq: it lands only where it was planned
        "rebase": row["branch"] is None and not (messages and sealing_now() is not None),
        "read_groups": sorted(mirror.loaded),
        "read_anchors": sorted({int(group["anchor"]) for group in mirror.loaded.values()}),
        **_columns("unseen_", ("anchors", "slots"), _places(plan.summary_groups) if unseen else []),
        "link_groups": [group_id for group_id, _ in links],
        "link_actions": [action for _, action in links],
        **rows_json(plan.group_rows),
        **_columns("x_", _EXCLUSION, exclusions),
        **_columns("m_", statement.messages.table_columns, messages),
    }
    bound.update(("e_" + name, value) for name, value in _event_row(statement, values).items())
    parameters = tuple(bound[n] for n in statement.names)
    found = None
    try:
        for _attempt in range(_ATTEMPTS):
            found = (await conn.exec_driver_sql(statement.sql, parameters)).one()._mapping
            if found["written"] is not None or not found["again"]:
                break
    except IntegrityError:
        return None  # another writer stored a summary's id: the transactional write sees it
    if found is None:
        return None
    if found["written"] is None:
        return MOVED
    after = {total: found[f"active_{total}"] for total in _TOTALS}
    written = event.model_copy(
        update={
            **{f"{total}_after": value for total, value in after.items()},
            **{
                f"{total}_before": value - bound[f"d_active_{total}"]
                for total, value in after.items()
            },
        }
    )
    log_event(written)
    return written, found["written"] != planned.revision


def _event_row(statement: _Statement, values: Mapping[str, Any]) -> dict[str, Any]:
    """The event's parameters as the driver takes them (bind processors applied)."""
    event = statement.event
    return dict(zip(event.columns, event.row(values), strict=True))
