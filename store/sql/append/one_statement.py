"""An append in one or two round trips, where the database runs data-modifying ``WITH``
queries (PostgreSQL): the reads without a lock (or none), every write in one statement
that takes effect only if the session is still as read.

The transactional append (:func:`~store.sql.append.writer.append_messages`) is
``BEGIN``, the session row locked with its reads, the messages' insert, the groups'
insert, the session row, ``COMMIT``: six round trips, the session locked across five of
them. Here, on a connection in autocommit:

1. one statement reads what the transactional append reads with its lock (the session
   row, the stored hashes of the new ids, the open calls and early results they name),
   as of its own snapshot; the groups those point to, when there are any, are a second;
2. the annotation and the rows are built exactly as the transactional append builds
   them (:func:`~store.sql.append.writer.plan_append`);
3. one statement writes them all, each part a ``WITH`` query over arrays (``unnest``),
   gated by the first: the session row's ``UPDATE`` where its cache key (incarnation,
   revision) is still the one read. Every write of a session's messages, groups or
   calls moves that key, so an unchanged key means the plan was made from the state
   it is written over; the ``UPDATE`` holds the row lock for the statement alone.

Where a view of this store read the session row since the session last changed, the
first step is left out: the append is planned from that row as if the read had found
none of the messages' ids stored and none of the calls they name open or answered early
(the usual turn: new messages whose calls are answered in the same batch), and the
statement's gate checks that too. Where it does not hold, the statement writes nothing
and the steps above follow.

It gives None, having written nothing, when the transactional append should do the
work: a session not stored yet, a fork, an annotation that merges stored groups, an
append too large for one statement (a bulk append goes by ``COPY``), or a key that
moved (another writer got there first: the transactional append reads again under the
lock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from sqlalchemy.engine import Dialect, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from store.rules.checks import check_tokenizer
from store.rules.identity import dedupe, new_messages
from store.sql.annotation import prefetch
from store.sql.append.counting import count_in_background
from store.sql.append.inserts import (
    INSERT_CHUNK,
    group_insert,
    holds_large_text,
    message_insert,
)
from store.sql.append.rows import AppendContext
from store.sql.append.writer import (
    GROUP_CHANGES,
    SESSION_ADDED,
    SESSION_VALUES,
    Appended,
    AppendPlan,
    WrittenRows,
    plan_append,
    planned_calls,
    session_params,
)
from store.sql.branches.sharing import refuse_tail
from store.sql.codec import sealing_now
from store.sql.dialect import kept_on
from store.sql.driver_sql import Parameters, RowReader, row_reader, rows_of, sql_type
from store.sql.projection.cache import session_key
from store.sql.schema import EARLY_RESULTS, GROUPS, MESSAGES, OPEN_CALLS, SESSIONS
from store.sql.statements import CHAINED
from strategies.messages import Message

__all__ = ["append_in_one_statement"]


_CHANGED: Final = ("group_id", "message_count", "token_count", *GROUP_CHANGES)
"""The columns of a stored group's change (:attr:`~store.sql.append.writer.AppendPlan.changed`)."""
_GATE: Final = "EXISTS (SELECT FROM written_session)"
_ATTEMPTS: Final = 3
"""How often the statement is sent while a commit after its snapshot is what stopped it
(see :func:`_write`), before the transactional append takes over."""


@dataclass(frozen=True, slots=True)
class _Statement:
    sql: str
    names: tuple[str, ...]
    messages: tuple[str, ...]
    """The message table's column of each value of a message row, in order."""
    groups: tuple[str, ...]
    """The group table's column of each value of a new group's row, in order."""
    texts: tuple[int, ...]
    """Where in a message row its stored texts are."""
    session: RowReader
    """The session row as written (:data:`_SESSION_RETURNED`), after ``written`` and
    ``again`` in the statement's rows."""
    group: RowReader
    """A new group's row as written, after the session row's columns."""


def _statement(dialect: Dialect) -> _Statement:
    return kept_on(dialect, "one_statement_append", lambda: _write(dialect))


_SESSION_RETURNED: Final = tuple(c.key for c in SESSIONS.c if c.key != "metadata")
"""The session row's columns the statement returns as written: all but its metadata,
which an append leaves as it was (and a read gives as text or parsed, by the read)."""
_GROUP_RETURNED: Final = tuple(c.key for c in GROUPS.c)

_SHIFTED: Final = ("next_seq", "position", "turn")
"""The session row's counters an append moves on (by ``d_<column>``) from where the
statement finds them: an append planned at an older revision lands after the writes
since (see :func:`_write`)."""
_MESSAGE_SHIFTS: Final = {"seq": "seq_shift", "anchor": "seq_shift"}
_GROUP_SHIFTS: Final = {
    "anchor": "seq_shift",
    "first_seq": "seq_shift",
    "first_position": "position_shift",
    "turn": "turn_shift",
    "written_revision": "revision_shift",
}


def _write(dialect: Dialect) -> _Statement:
    """The append's one statement for ``dialect``, its parameters named.

    The session row's ``UPDATE`` is the gate. It writes when the session is as read
    (its revision unchanged) or, for an append that only adds groups of its own
    (``rebase``, :func:`_adds_only_its_own`: no stored group touched, no stored call or
    early result named, the tail closed, nothing sealed), when every write since was an
    append or a compaction without reductions (the write chain), the tail is still
    closed and no call the append names is open or answered early: annotation then
    gives the same groups moved by as many ``seq``, positions and turns as the writes
    since added, and the statement moves them (``w.seq_shift`` ...).

    An append planned without the read (``unread_ids``: the ids of its messages, empty
    when the read was made) also needs none of those ids stored and none of the calls it
    names open or answered early, checked through the indexes of each (a stored id
    would otherwise end the statement with a unique violation, which the server logs).

    A statement that waited for another writer's lock sees the session row as that
    writer left it, but other tables as its snapshot saw them: where the append names
    calls, the snapshot's revision must be the row's. The statement gives the revision
    it wrote (null when it wrote nothing) and ``again``: whether the gate held as its
    snapshot saw the session, so that a commit after the snapshot is what stopped it
    and the same statement sent again may write.
    """
    bind = Parameters()
    tenant, session_id = bind("tenant", "text"), bind("session_id", "text")
    s = SESSIONS.c
    values = [name for name in SESSION_VALUES if name not in _SHIFTED]
    sets = [f"{name} = {bind('v_' + name, sql_type(s[name], dialect))}" for name in values]
    sets += [f"{name} = {name} + {bind('d_' + name, 'bigint')}" for name in _SHIFTED]
    sets += [f"{name} = {name} + {bind('d_' + name, 'bigint')}" for name in SESSION_ADDED]
    sets += [f"{name} = {value}" for name, value in CHAINED.items()]
    message_binds = message_insert(dialect)
    messages = message_binds.table_columns
    groups = group_insert(dialect).table_columns
    keyed = f"tenant = {tenant} AND session_id = {session_id}"
    calls = ("call_id", "group_id", "ambiguous")
    revision, named = bind("revision", "bigint"), bind("named_calls", "text[]")
    # the counter as written less where the plan would have set it: how far the writes
    # since the read moved it (zero when there were none)
    shifts = ", ".join(
        f"{name} - {bind('v_' + name, 'bigint')} AS {'seq' if name == 'next_seq' else name}_shift"
        for name in _SHIFTED
    )
    message_rows = rows_of(MESSAGES, messages, "m_", bind, dialect, _MESSAGE_SHIFTS)
    group_rows = rows_of(GROUPS, groups, "g_", bind, dialect, _GROUP_SHIFTS)
    changes = rows_of(GROUPS, _CHANGED, "u_", bind, dialect)
    call_rows = rows_of(OPEN_CALLS, calls, "c_", bind, dialect)
    early_rows = rows_of(EARLY_RESULTS, calls[:2], "e_", bind, dialect)
    unanswered = " AND ".join(
        f"NOT EXISTS (SELECT FROM {table.name} WHERE {keyed} AND call_id = ANY({named}))"
        for table in (OPEN_CALLS, EARLY_RESULTS)
    )
    ids = bind("unread_ids", "text[]")
    gate = f"""incarnation IS NOT DISTINCT FROM {bind("incarnation", "text")}
    AND (revision = {revision} OR (
      {bind("rebase", "boolean")} AND branch IS NULL AND tail_group_id IS NULL
      AND chain_revision = revision AND chain_since <= {revision}
      AND {unanswered}
    ))
    AND (cardinality({ids}) = 0 OR (
      NOT EXISTS (SELECT FROM {MESSAGES.name} WHERE {keyed} AND message_id = ANY({ids}))
      AND {unanswered}
    ))"""
    sql = f"""WITH written_session AS (
  UPDATE {SESSIONS.name} SET {", ".join(sets)}, revision = revision + 1
  WHERE {keyed} AND {gate}
    AND (revision = {revision} OR cardinality({named}) = 0 OR revision = (
      SELECT seen.revision FROM {SESSIONS.name} AS seen
      WHERE seen.tenant = {tenant} AND seen.session_id = {session_id}
    ))
  RETURNING {", ".join(_SESSION_RETURNED)}, {shifts},
    revision - {revision} - 1 AS revision_shift
), written_messages AS (
  INSERT INTO {MESSAGES.name} ({", ".join(messages)})
  {message_rows}
), written_groups AS (
  INSERT INTO {GROUPS.name} ({", ".join(groups)})
  {group_rows}
  RETURNING {", ".join(_GROUP_RETURNED)}
), changed_groups AS (
  UPDATE {GROUPS.name} AS t SET
    message_count = t.message_count + c.message_count,
    token_count = t.token_count + c.token_count,
    written_revision = (SELECT revision FROM written_session),
    {", ".join(f"{name} = c.{name}" for name in GROUP_CHANGES)}
  FROM ({changes}) AS c
  WHERE t.tenant = {tenant} AND t.session_id = {session_id} AND t.group_id = c.group_id
    AND {_GATE}
), dropped_calls AS (
  DELETE FROM {OPEN_CALLS.name} WHERE {keyed}
    AND call_id = ANY({bind("gone_calls", "text[]")}) AND {_GATE}
), written_calls AS (
  INSERT INTO {OPEN_CALLS.name} (tenant, session_id, {", ".join(calls)})
  SELECT {tenant}, {session_id}, c.* FROM ({call_rows}) AS c
  WHERE {_GATE}
  ON CONFLICT (tenant, session_id, call_id)
  DO UPDATE SET group_id = excluded.group_id, ambiguous = excluded.ambiguous
), dropped_early AS (
  DELETE FROM {EARLY_RESULTS.name} WHERE {keyed}
    AND call_id = ANY({bind("gone_early", "text[]")}) AND {_GATE}
), written_early AS (
  INSERT INTO {EARLY_RESULTS.name} (tenant, session_id, call_id, group_id)
  SELECT {tenant}, {session_id}, e.* FROM ({early_rows}) AS e
  WHERE {_GATE}
  ON CONFLICT (tenant, session_id, call_id) DO UPDATE SET group_id = excluded.group_id
)
SELECT w.written, w.again,
  {", ".join(f"s.{name}" for name in _SESSION_RETURNED)},
  {", ".join(f"g.{name}" for name in _GROUP_RETURNED)}
FROM (SELECT (SELECT revision FROM written_session) AS written,
  EXISTS (SELECT FROM {SESSIONS.name} WHERE {keyed} AND {gate}) AS again) AS w
LEFT JOIN written_session AS s ON true
LEFT JOIN written_groups AS g ON true"""
    return _Statement(
        sql,
        tuple(bind.names),
        messages,
        groups,
        message_binds.texts,
        row_reader(SESSIONS, _SESSION_RETURNED, dialect),
        row_reader(GROUPS, _GROUP_RETURNED, dialect),
    )


def _adds_only_its_own(plan: AppendPlan, session: Mapping[Any, Any]) -> bool:
    """The half of the conditions for landing after other writers' appends that the
    plan alone can tell: it touches no stored group, found none of the calls or early
    results it names stored, was made with the tail closed, and seals nothing (a sealed
    text binds its ``seq``). The other half, that the writes since the read leave those
    true, is the statement's gate (:func:`_write`)."""
    loaded = plan.loaded
    return not (
        plan.changed
        or loaded.groups
        or loaded.call_rows
        or loaded.early_rows
        or session["tail_group_id"] is not None
        or sealing_now() is not None
    )


def _columns(
    prefix: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, Sequence[Any]]:
    """One array parameter a column of ``rows`` (named ``prefix`` + column)."""
    if not rows:
        return {prefix + name: () for name in names}
    return {
        prefix + name: list(values)
        for name, values in zip(names, zip(*rows, strict=True), strict=True)
    }


async def append_in_one_statement(
    conn: AsyncConnection,
    ctx: AppendContext,
    messages: Sequence[Message],
    *,
    known: Mapping[Any, Any] | None = None,
) -> Appended | None:
    """Append ``messages`` on ``conn``, a connection in autocommit, in two round trips
    (see the module); None, having written nothing, when the transactional append
    should.

    ``known``: the session row as this store last read it, at the key its view cache
    holds. Where the append can be planned from that row alone (a root whose tail is
    closed, of this store's tokenizer), the statement is sent first without the read, as
    if the read had found none of the messages' ids stored and none of the calls they
    name open or answered early; its gate checks that too (``unread_ids``, see
    :func:`_write`). One round trip then; where the gate does not hold, the read is made
    and the statement sent again from it."""
    if known is not None and _plans_from(known, ctx):
        appended = await _planned_and_written(conn, ctx, messages, known, {}, (), unread=True)
        if appended is not None:
            return appended
    read = await prefetch(conn, ctx.tenant, ctx.session_id, messages)
    if read is None or read.hashes is None:
        return None  # not stored yet, or a fork (its hashes are its lineage's)
    check_tokenizer(read.session["tokenizer"], ctx.tokenizer.name, ctx.session_id)
    refuse_tail(read.session)
    return await _planned_and_written(
        conn, ctx, messages, read.session, read.hashes, read.calls, unread=False
    )


def _plans_from(known: Mapping[Any, Any], ctx: AppendContext) -> bool:
    """Whether an append can be planned from the session row ``known`` alone: a root
    (a fork's hashes are its lineage's) whose tail is closed (an open one is a stored
    group the annotation reads), counted with this store's tokenizer."""
    return (
        known["branch"] is None
        and known["tail_group_id"] is None
        and known["tokenizer"] == ctx.tokenizer.name
    )


async def _planned_and_written(
    conn: AsyncConnection,
    ctx: AppendContext,
    messages: Sequence[Message],
    session: Mapping[Any, Any],
    hashes: Mapping[str, str],
    calls: Sequence[Mapping[str, Any]] | None,
    *,
    unread: bool,
) -> Appended | None:
    """The append planned from ``session`` and what was read of the messages' ids
    (``hashes``) and calls, written in one statement; ``unread``: those were not read
    (none assumed stored), and the statement's gate checks it."""
    fresh = new_messages(messages, hashes)
    deduped = dedupe(ctx.session_id, messages, hashes)
    if not fresh:
        return Appended(0, session_key(session), frozenset())
    if len(fresh) > INSERT_CHUNK:
        return None
    counts = count_in_background(ctx, fresh)
    try:
        plan = await plan_append(conn, ctx, session, fresh, deduped, counts, calls)
    finally:
        if counts is not None:
            counts.close()
    statement = _statement(conn.dialect)
    if plan is None or holds_large_text(plan.messages, statement.texts):
        return None
    calls_left, early, gone_calls, gone_early = planned_calls(ctx, plan)
    params: dict[str, Any] = {
        "tenant": ctx.tenant,
        "session_id": ctx.session_id,
        "revision": session["revision"],
        "incarnation": session["incarnation"],
        "gone_calls": gone_calls,
        "gone_early": gone_early,
        "rebase": _adds_only_its_own(plan, session),
        "named_calls": sorted(plan.loaded.wanted_calls),
        "unread_ids": [m.message_id for m in fresh] if unread else [],
        **session_params(ctx, session, plan.annotation.state, plan.totals),
    }
    for name in _SHIFTED:  # added to the counters as found, not set (see _write)
        params["d_" + name] = params["v_" + name] - session[name]
    params.update(_columns("m_", statement.messages, plan.messages))
    params.update(_columns("g_", statement.groups, plan.groups))
    params.update(_columns("u_", _CHANGED, plan.changed))
    params.update(_columns("c_", ("call_id", "group_id", "ambiguous"), calls_left))
    params.update(_columns("e_", ("call_id", "group_id"), early))
    bound = tuple(params[name] for name in statement.names)
    for _attempt in range(_ATTEMPTS):
        try:
            rows = (await conn.exec_driver_sql(statement.sql, bound)).all()
        except IntegrityError:
            return None  # another writer stored one of these ids: dedupe under the lock
        first = rows[0]._mapping
        revision, again = first["written"], first["again"]
        if revision is not None or not again:
            break
    if revision is None:
        return None  # another writer moved the session: read again under the lock
    if revision != session["revision"] + 1:
        return replace(plan.appended, before=None)  # landed after other writes
    if plan.changed or plan.loaded.groups:
        return plan.appended  # stored groups changed too: their rows are read again
    return replace(plan.appended, written=_written(statement, session, rows))


def _written(
    statement: _Statement, session: Mapping[Any, Any], rows: Sequence[Row[Any]]
) -> WrittenRows:
    """The session row and the new groups' rows the statement returned (the metadata,
    which it does not return, as ``session`` had it)."""
    width = 2 + len(_SESSION_RETURNED)
    values = [tuple(row) for row in rows]
    after = statement.session(values[0][2:width])
    after["metadata"] = session["metadata"]
    groups = [statement.group(row[width:]) for row in values if row[width] is not None]
    return WrittenRows(after, groups)
