"""Core statements the store runs again and again, compiled once and bound without
SQLAlchemy's execution machinery.

A turn runs a dozen or more short statements, nearly all of them built once (module
constants and cached builders) and executed with new parameters each time. For each
execution SQLAlchemy looks the statement up in its compiled cache (walking it to make
the cache key), builds an execution context, runs every parameter through
``construct_params`` and builds a cursor result with its metadata: on SQLite, where the
driver's own call takes tens of microseconds, that was about two thirds of a
statement's cost and a fifth of a turn.

:func:`prepare` gives, for a statement object seen before and the names of its
parameters, the statement compiled once for the dialect with what SQLAlchemy would do
for each execution worked out in advance: the parameters' positional order, the bind
processors of those that have one, the values the statement binds itself, and the keys
and result processors of its rows. :meth:`Prepared.bind` and :meth:`Prepared.result`
then do exactly that per execution: the same SQL, the same driver parameters and the
same row values as SQLAlchemy's own execution, in a :class:`PreparedResult` (a
SQLAlchemy ``Result`` of those rows).

Only what can be worked out in advance is prepared; anything else gives None and the
caller lets SQLAlchemy execute it: a statement seen for the first time (one built anew
for each call is found in SQLAlchemy's cache by its shape, where compiling it here at
every call would cost more), parameters that expand (``IN`` lists) or
are rendered as literals, Python-side column defaults, escaped parameter names,
parameter sets of different keys, a multi-row ``INSERT`` that SQLAlchemy would batch,
and statements with execution options of their own. Which connections may run a
prepared statement, and how, is the business of the driver modules
(:mod:`store.sql.drivers.sqlite`, :mod:`store.sql.drivers.asyncpg`).

The result processors are chosen by the type code the driver gives each column, as
SQLAlchemy's cursor result chooses them: asyncpg describes a column by its type's oid
(PostgreSQL's ``Float`` needs it), SQLite by None. They are chosen once for each set of
type codes a statement returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self
from weakref import WeakKeyDictionary

from sqlalchemy.engine import Connection, Dialect, Engine, IteratorResult
from sqlalchemy.engine.result import SimpleResultMetaData
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.base import Executable

from store.sql.dialect import kept_on

__all__ = [
    "Prepared",
    "PreparedEngine",
    "PreparedResult",
    "listened",
    "parameter_sets",
    "prepare",
]

Processor = Any
"""A bind or result processor: one value in, one value out."""

_UNSUPPORTED: Final = None

_NO_ROWS: Final = SimpleResultMetaData(())
"""The keys of a statement without rows (an ``INSERT``, ``UPDATE`` or ``DELETE``)."""


class PreparedEngine(AsyncEngine):
    """An :class:`~sqlalchemy.ext.asyncio.AsyncEngine` whose connections, its views with
    other execution options too, are of its class's ``_connection_cls``: a driver
    module's connection that runs prepared statements."""

    __slots__ = ()

    def execution_options(self, **opt: Any) -> AsyncEngine:
        return type(self)(self.sync_engine.execution_options(**opt))

    @classmethod
    def _regenerate_proxy_for_target(cls, target: Engine, **additional_kw: Any) -> Self:
        return cls(target)


class PreparedResult(IteratorResult[Any]):
    """The rows of a prepared statement as a SQLAlchemy result (``all()``,
    ``mappings()``, ``scalar_one_or_none()``...), with the driver's ``rowcount``."""

    rowcount: int = -1


@dataclass(frozen=True, slots=True)
class Prepared:
    """A statement compiled for one dialect and one set of parameter names."""

    sql: str
    binds: tuple[tuple[str, Processor | None, bool, Any], ...]
    """Each positional parameter: its name, bind processor, whether the caller gives
    it, and otherwise the (processed) value the statement binds itself."""
    metadata: SimpleResultMetaData | None
    """The keys of the statement's rows; None for a statement without rows."""
    types: tuple[Any, ...]
    """The SQLAlchemy type of each result column."""
    _processors: dict[tuple[Any, ...], tuple[tuple[int, Processor], ...]] = field(
        default_factory=dict, compare=False
    )
    """The result processor of each column that has one, by position, for each set of
    type codes the driver gave the columns."""

    def bind(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        """The driver's parameters for one parameter set, as SQLAlchemy binds them."""
        out: list[Any] = []
        for name, process, given, fixed in self.binds:
            if given:
                value = values[name]
                out.append(value if process is None else process(value))
            else:
                out.append(fixed)
        return tuple(out)

    def result(
        self,
        dialect: Dialect,
        coltypes: tuple[Any, ...] | None,
        rows: Sequence[Any] | None,
        rowcount: int,
    ) -> PreparedResult:
        """The result of an execution from the driver's type code of each column (None
        without a description), rows and rowcount, each value through the result
        processor SQLAlchemy's cursor result chooses for its column and type code."""
        metadata = self.metadata
        if metadata is None:
            result = PreparedResult(_NO_ROWS, iter(()))
        else:
            width = len(metadata.keys)
            if coltypes is None or len(coltypes) != width:
                raise RuntimeError(  # pragma: no cover - a compiled SELECT names its columns
                    f"the driver returned {0 if coltypes is None else len(coltypes)} "
                    f"columns for {width} compiled ones"
                )
            found = rows or ()
            processors = self._processors.get(coltypes)
            if processors is None:
                processors = self._processors[coltypes] = tuple(
                    (index, process)
                    for index, (type_, code) in enumerate(zip(self.types, coltypes, strict=True))
                    if (process := type_._cached_result_processor(dialect, code)) is not None
                )
            if processors:
                found = [_processed(row, processors) for row in found]
            result = PreparedResult(metadata, iter(found))
        result.rowcount = rowcount
        return result


def _processed(row: Sequence[Any], processors: tuple[tuple[int, Processor], ...]) -> list[Any]:
    values = list(row)
    for index, process in processors:
        values[index] = process(values[index])
    return values


def listened(sync: Connection) -> bool:
    """Whether anything listens to the statements the connection executes (a prepared
    statement would skip the listeners: SQLAlchemy executes it then)."""
    dispatch = sync.dispatch
    return bool(dispatch.before_cursor_execute or dispatch.after_cursor_execute)


_Key = tuple[tuple[str, ...], bool]
_Seen = WeakKeyDictionary[Executable, dict[_Key, "Prepared | None"]]
"""What each statement object seen so far compiled to for one dialect, by parameter
names and whether it runs for many parameter sets (None: SQLAlchemy executes it)."""


def parameter_sets(parameters: Any) -> list[Mapping[str, Any]] | None:
    """The parameter sets of an ``execute`` call, as SQLAlchemy distills them (None when
    they are of a shape left to SQLAlchemy)."""
    if parameters is None:
        return []
    if isinstance(parameters, Mapping):
        return [parameters]
    if isinstance(parameters, list | tuple) and all(isinstance(p, Mapping) for p in parameters):
        return list(parameters)
    return None


def prepare(
    dialect: Dialect, statement: Executable, sets: Sequence[Mapping[str, Any]]
) -> Prepared | None:
    """``statement`` prepared for ``dialect`` and the names of ``sets`` (the parameter
    sets of one execution), or None when SQLAlchemy should execute it (see the module)."""
    seen: _Seen = kept_on(dialect, "prepared", WeakKeyDictionary)
    entries = seen.get(statement)
    if entries is None:
        seen[statement] = {}  # seen once: prepared only when it comes back
        return None
    names = tuple(sorted(sets[0])) if sets else ()
    many = len(sets) > 1
    if many and any(len(s) != len(names) or any(n not in s for n in names) for s in sets):
        return None
    key = (names, many)
    if key in entries:
        return entries[key]
    prepared = entries[key] = _compile(dialect, statement, names, many)
    return prepared


def _compile(
    dialect: Dialect, statement: Executable, names: tuple[str, ...], many: bool
) -> Prepared | None:
    """Compile as SQLAlchemy compiles for execution (the parameter names as column keys),
    and work out each execution's binding, or None if it cannot be done in advance."""
    if statement.get_execution_options():
        return _UNSUPPORTED
    compiled: Any = statement.compile(  # type: ignore[attr-defined]
        dialect=dialect, column_keys=list(names), for_executemany=many
    )
    if (
        not compiled.positional
        or compiled.escaped_bind_names
        or compiled.literal_execute_params
        or compiled.post_compile_params
        or compiled.insert_prefetch
        or compiled.update_prefetch
        or compiled.schema_translate_map
        or (many and compiled._insertmanyvalues is not None)
        or (compiled._result_columns and not compiled._ordered_columns)
        or compiled._textual_ordered_columns
    ):
        return _UNSUPPORTED
    given = set(names)
    processors = compiled._bind_processors
    binds: list[tuple[str, Processor | None, bool, Any]] = []
    for name in compiled.positiontup or ():
        process = processors.get(name)
        if name in given:
            binds.append((name, process, True, None))
            continue
        bind = compiled.binds.get(name)
        if bind is None or bind.required or bind.callable is not None:
            return _UNSUPPORTED  # SQLAlchemy says what is missing
        value = bind.value
        binds.append((name, None, False, value if process is None else process(value)))
    columns = compiled._result_columns
    metadata: SimpleResultMetaData | None = None
    if columns:
        keys = [column[0] for column in columns]
        if len(set(keys)) != len(keys):
            return _UNSUPPORTED  # SQLAlchemy's result says which duplicate is ambiguous
        metadata = SimpleResultMetaData(keys)
    types = tuple(column[3] for column in columns or ())
    return Prepared(str(compiled), tuple(binds), metadata, types)
