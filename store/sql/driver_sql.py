"""SQL written out for the driver, for the statements the store sends whole with
``exec_driver_sql`` (PostgreSQL: numbered parameters, one array a column): compiled once
and bound as tuples, without SQLAlchemy's per-execution work on a statement of many
``WITH`` queries."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import JSON, Column, Table
from sqlalchemy.engine import Dialect

__all__ = ["Parameters", "RowReader", "array_type", "row_reader", "rows_of", "sql_type"]


class Parameters:
    """Numbered parameters (``$1``, ``$2``...) of a statement being written, by name."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str, cast: str) -> str:
        self.names.append(name)
        return f"${len(self.names)}::{cast}"


def sql_type(column: Column[Any], dialect: Dialect) -> str:
    """The type of ``column`` as ``dialect`` writes it in a cast."""
    return column.type.compile(dialect=dialect)


def array_type(column: Column[Any], dialect: Dialect) -> str:
    """The type of an array parameter of ``column``'s values as the driver binds them: a
    JSON column's are the texts :mod:`store.sql.codec` encoded."""
    return "text[]" if isinstance(column.type, JSON) else f"{sql_type(column, dialect)}[]"


def rows_of(
    table: Table,
    columns: Sequence[str],
    prefix: str,
    bind: Parameters,
    dialect: Dialect,
    shifts: Mapping[str, str] | None = None,
) -> str:
    """``SELECT`` of ``table``'s ``columns`` from one array parameter a column (named
    ``prefix`` + column), each value cast to its column's type; with ``shifts``, joined
    to the written session row ``w``, each column it names moved by that row's shift."""
    c = table.c
    moved = shifts or {}
    arrays = ", ".join(bind(f"{prefix}{name}", array_type(c[name], dialect)) for name in columns)
    casts = ", ".join(
        f"CAST(u.{name} AS {sql_type(c[name], dialect)})"
        + (f" + w.{moved[name]}" if name in moved else "")
        + f" AS {name}"
        for name in columns
    )
    joined = " CROSS JOIN written_session AS w" if shifts is not None else ""
    return f"SELECT {casts} FROM unnest({arrays}) AS u({', '.join(columns)}){joined}"


RowReader = Callable[[Sequence[Any]], dict[str, Any]]
"""Makes a mapping of column names to values from a driver's row."""


def row_reader(table: Table, columns: Sequence[str], dialect: Dialect) -> RowReader:
    """How a driver's row of ``table``'s ``columns`` (in order) becomes the mapping a
    SQLAlchemy read gives: each value through its column type's result processor."""
    processors = tuple(
        table.c[name].type._cached_result_processor(dialect, None) for name in columns
    )
    keys = tuple(columns)

    def read(row: Sequence[Any]) -> dict[str, Any]:
        return {
            key: value if process is None or value is None else process(value)
            for key, process, value in zip(keys, processors, row, strict=True)
        }

    return read
