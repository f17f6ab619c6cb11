"""Prebuilt statements of the write paths (appends, compactions, restores) and the
reads they make.

Building a SQLAlchemy statement per call (conditions, ``values()``, a cache key over
every literal) cost more than running it on the per-turn path. These statements are
built once per shape, with every value a bound parameter, and executed with a plain
parameter dict.

Parameter names: ``w_tenant`` and ``w_session_id`` for the session key in ``WHERE``,
``ids`` for the set of keys a statement selects (see :func:`among`), ``v_<column>`` for
a value set, ``key_`` for the row of an executemany update. SQLAlchemy reserves a
column's own name for the ``SET`` clause, hence the prefixes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any, Final, Literal, TypeVar

from sqlalchemy import (
    ARRAY,
    String,
    Table,
    Text,
    any_,
    bindparam,
    false,
    func,
    insert,
    literal_column,
    null,
    select,
    text,
    true,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import CompoundSelect, Insert, Select, Update
from sqlalchemy.sql.elements import Null

from store.sql import dialect
from store.sql.schema import (
    EARLY_RESULTS,
    EVENT_GROUPS,
    EVENTS,
    GROUPS,
    MESSAGES,
    OPEN_CALLS,
    SESSIONS,
)

__all__ = [
    "CHAINED",
    "CHUNK",
    "EACH_KEY",
    "among",
    "among_params",
    "chunks",
    "each_params",
    "in_key_list",
    "insert_rows",
    "key_list",
    "key_params",
    "select_among",
    "select_calls_among",
    "select_groups_around",
    "session_update",
    "update_among",
    "update_each",
]

T = TypeVar("T")

EACH_KEY = "key_"
"""The bound parameter naming the row of an executemany update."""

CHUNK = 500
"""Rows per multi-row statement (well under every driver's bound-parameter limit)."""

_TABLES: Mapping[str, Table] = {
    "sessions": SESSIONS,
    "messages": MESSAGES,
    "groups": GROUPS,
    "events": EVENTS,
    "event_groups": EVENT_GROUPS,
    "open_calls": OPEN_CALLS,
    "early_results": EARLY_RESULTS,
}
"""The tables by the short names the functions here take."""


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Split ``items`` into slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _keys(table: Table) -> tuple[Any, Any]:
    return (
        table.c.tenant == bindparam("w_tenant"),
        table.c.session_id == bindparam("w_session_id"),
    )


def key_params(tenant: str, session_id: str) -> dict[str, Any]:
    """The session key's parameters of every statement here."""
    return {"w_tenant": tenant, "w_session_id": session_id}


ListMode = Literal["array", "json", "expanding"]
"""How a list of keys is bound: one array parameter (``= ANY``), one JSON array read by
``json_each``, or an expanding ``IN`` of at most :data:`CHUNK` keys. An expanding ``IN``
is rendered again on every execution, which costs a small read more than the database's
own work; the other two are compiled once."""


def list_mode(capabilities: dialect.Capabilities) -> ListMode:
    """The best :data:`ListMode` of a database."""
    if capabilities.array_parameters:
        return "array"
    return "json" if capabilities.json_lists else "expanding"


def _in_list(column: Any, name: str, mode: ListMode) -> Any:
    if mode == "array":
        # strings bound as text[]: an array of the column's own type (varchar(255)[])
        # would be coerced to text[] element by element, for every row compared
        element = Text() if isinstance(column.type, String) else column.type
        return column == any_(bindparam(name, type_=ARRAY(element)))
    if mode == "json":
        keys = func.json_each(bindparam(name, type_=String()))
        return column.in_(select(literal_column("value")).select_from(keys).scalar_subquery())
    return column.in_(bindparam(name, expanding=True))


def among(table: str, column: str, mode: ListMode) -> Any:
    """``column`` of ``table`` in the list bound as ``ids`` (:func:`among_params`)."""
    return _in_list(_TABLES[table].c[column], "ids", mode)


def in_key_list(column: Any, name: str, capabilities: dialect.Capabilities) -> Any:
    """``column`` in the keys bound as ``name`` (given by :func:`key_list`)."""
    return _in_list(column, name, list_mode(capabilities))


def key_list(keys: Iterable[Any], capabilities: dialect.Capabilities) -> Any:
    """The value of a parameter of :func:`in_key_list` holding ``keys`` (sorted; at most
    :data:`CHUNK` of them where the database binds an expanding ``IN``)."""
    ordered = sorted(keys)
    return json.dumps(ordered) if list_mode(capabilities) == "json" else ordered


def among_params(
    conn: AsyncConnection, base: Mapping[str, Any], ids: Iterable[Any]
) -> Iterator[dict[str, Any]]:
    """Parameter sets covering ``ids`` (sorted): one as an array or a JSON array, else
    chunks of an expanding ``IN``."""
    ordered = sorted(ids)
    if not ordered:
        return
    capabilities = dialect.of(conn)
    if list_mode(capabilities) != "expanding":
        yield {**base, "ids": key_list(ordered, capabilities)}
        return
    for part in chunks(ordered):
        yield {**base, "ids": list(part)}


@cache
def _select_among(
    table: str, column: str, mode: ListMode, extra: str, columns: tuple[str, ...]
) -> Select[Any]:
    t = _TABLES[table]
    picked = [t.c[name] for name in columns] if columns else [t]
    query = select(*picked).where(*_keys(t), among(table, column, mode))
    if extra == "any_exclusion":  # lets SQLite use the (excluded, anchor) index
        query = query.where(t.c.excluded.in_([False, True]))
    return query


def select_among(
    conn: AsyncConnection,
    table: str,
    column: str,
    extra: str = "",
    columns: tuple[str, ...] = (),
) -> Select[Any]:
    """``SELECT`` of the session's rows of ``table`` whose ``column`` is in ``ids``: the
    given ``columns``, or all of them. ``extra="any_exclusion"`` states both values of
    ``excluded`` (for SQLite's index)."""
    return _select_among(table, column, list_mode(dialect.of(conn)), extra, columns)


@cache
def _select_calls_among(mode: ListMode) -> CompoundSelect[Any]:
    calls, results = OPEN_CALLS, EARLY_RESULTS
    return union_all(
        select(false().label("early"), calls.c.call_id, calls.c.group_id, calls.c.ambiguous).where(
            *_keys(calls), among("open_calls", "call_id", mode)
        ),
        select(
            true().label("early"),
            results.c.call_id,
            results.c.group_id,
            false().label("ambiguous"),
        ).where(*_keys(results), among("early_results", "call_id", mode)),
    )


def select_calls_among(conn: AsyncConnection) -> CompoundSelect[Any]:
    """The session's open calls and early results whose ``call_id`` is in ``ids``, in
    one statement (an append's one round trip for both): ``early`` is true on an early
    result's row (its ``ambiguous`` false), false on an open call's. Parameters as
    :func:`select_among`'s."""
    return _select_calls_among(list_mode(dialect.of(conn)))


@cache
def _select_groups_around(mode: ListMode) -> CompoundSelect[Any]:
    touched = GROUPS.alias("touched")
    anchors = select(touched.c.anchor).where(
        touched.c.tenant == bindparam("w_tenant"),
        touched.c.session_id == bindparam("w_session_id"),
        _in_list(touched.c.group_id, "ids", mode),
    )
    return union_all(
        select(GROUPS).where(*_keys(GROUPS), among("groups", "group_id", mode)),
        select(GROUPS).where(
            *_keys(GROUPS),
            GROUPS.c.excluded.in_([False, True]),  # lets SQLite use the (excluded, anchor) index
            GROUPS.c.anchor.in_(anchors),
        ),
    )


def select_groups_around(conn: AsyncConnection) -> CompoundSelect[Any]:
    """The session's groups whose ``group_id`` is in ``ids``, and every group at the
    anchor of one of them, in one statement (a group may come twice). Parameters as
    :func:`select_among`'s."""
    return _select_groups_around(list_mode(dialect.of(conn)))


@cache
def _update_among(
    table: str, column: str, mode: ListMode, values: tuple[str, ...], nulls: tuple[str, ...]
) -> Update:
    t = _TABLES[table]
    statement = update(t).where(*_keys(t), among(table, column, mode))
    sets: dict[str, Any] = {name: bindparam(f"v_{name}", type_=t.c[name].type) for name in values}
    sets.update((name, null()) for name in nulls)
    return statement.values(sets)


def update_among(
    conn: AsyncConnection, table: str, column: str, values: Mapping[str, Any]
) -> tuple[Update, dict[str, Any]]:
    """``UPDATE`` giving ``values`` to the rows whose ``column`` is in ``ids``, and the
    value parameters. A value given as ``null()`` is SQL ``NULL`` written in the
    statement (a JSON column bound ``None`` would store JSON ``null``)."""
    plain = tuple(sorted(k for k, v in values.items() if not isinstance(v, Null)))
    nulls = tuple(sorted(k for k, v in values.items() if isinstance(v, Null)))
    statement = _update_among(table, column, list_mode(dialect.of(conn)), plain, nulls)
    return statement, {f"v_{k}": values[k] for k in plain}


@cache
def update_each(table: str, column: str) -> Update:
    """``UPDATE`` of one row whose ``column`` is the parameter :data:`EACH_KEY`, run as an
    executemany; each parameter set names the columns it sets (:func:`each_params`)."""
    t = _TABLES[table]
    return update(t).where(*_keys(t), t.c[column] == bindparam(EACH_KEY))


def each_params(
    tenant: str, session_id: str, rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The parameter sets of :func:`update_each` for ``rows`` (the session key added)."""
    keys = key_params(tenant, session_id)
    return [{**keys, **row} for row in rows]


def session_update(
    values: Iterable[str],
    added: Iterable[str],
    *,
    counters: Iterable[str],
    revision: bool = True,
    chained: bool = False,
) -> Update:
    """``UPDATE`` of the session row: ``v_<column>`` sets a column, ``d_<column>`` adds to
    one, each of ``counters`` (and ``revision``, unless ``revision=False``) goes up by one.
    A ``chained`` write extends the session's write chain (:data:`CHAINED`)."""
    c = _TABLES["sessions"].c
    sets: dict[str, Any] = {name: bindparam(f"v_{name}", type_=c[name].type) for name in values}
    sets.update((name, c[name] + bindparam(f"d_{name}", type_=c[name].type)) for name in added)
    bumped = ("revision", *counters) if revision else tuple(counters)
    sets.update((name, c[name] + 1) for name in bumped)
    if chained:
        sets.update((name, text(sql)) for name, sql in CHAINED.items())
    return update(_TABLES["sessions"]).where(*_keys(_TABLES["sessions"])).values(sets)


CHAINED: Final = {
    "chain_since": "CASE WHEN chain_revision = revision THEN chain_since ELSE revision END",
    "chain_revision": "revision + 1",
}
"""What a write that leaves every group's messages as they were unless it changes the
group's row sets in the session row (with ``revision = revision + 1``): the chain goes
on from the write before when that one was of the chain too, else starts at the
revision written over. Both read the row as it was (``SET`` sees the old values)."""


@cache
def insert_rows(table: str) -> Insert:
    """A plain ``INSERT`` into ``table``, its columns given by the parameter sets."""
    return insert(_TABLES[table])
