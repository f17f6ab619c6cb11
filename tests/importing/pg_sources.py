"""PostgreSQL copies of SQLite import sources, for the tests of database URLs.

:func:`copy_tables` loads the tables of a SQLite source
into it table by table, with the column types the source's library gives them on
PostgreSQL (a declared ``DATETIME`` a ``timestamp``, a JSON column ``jsonb``, as
SQLAlchemy's ``JSON`` and ADK's ``DynamicJSON`` are there).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from tests.conftest import run_sync

PASSWORD = "s3cret-pw"
"""Put in the source URLs (the server trusts local users, so it is never checked):
nothing the import shows or stores may hold it."""


def _pg_type(declared: str, column: str, json_columns: frozenset[str]) -> str:
    kind = declared.upper()
    if column in json_columns:
        return "jsonb"
    if "BOOL" in kind:
        return "boolean"
    if "INT" in kind:
        return "bigint"
    if "DATETIME" in kind or "TIMESTAMP" in kind:
        return "timestamp"
    if any(word in kind for word in ("REAL", "FLOAT", "DOUBLE")):
        return "double precision"
    if "BLOB" in kind:
        return "bytea"
    return "text"


def _value(pg_type: str, value: Any) -> Any:
    if value is None:
        return None
    if pg_type == "timestamp" and isinstance(value, str):
        return datetime.fromisoformat(value)
    if pg_type == "boolean":
        return bool(value)
    return value


def _tables(path: Path) -> list[tuple[str, list[tuple[str, str]], list[tuple[Any, ...]]]]:
    with closing(sqlite3.connect(path)) as connection:
        names = [
            str(row[0])
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        found = []
        for table in names:
            columns = [
                (str(c[1]), str(c[2])) for c in connection.execute(f'PRAGMA table_info("{table}")')
            ]
            rows = connection.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()
            found.append((table, columns, rows))
    return found


def copy_tables(path: Path, url: str, json_columns: frozenset[str] = frozenset()) -> None:
    """Create and fill in the database at ``url`` every table of the SQLite file at
    ``path``, rows in the order of their row ids (a serial ``id`` keeps its values)."""

    async def copy() -> None:
        connection = await asyncpg.connect(url)
        try:
            for table, columns, rows in _tables(path):
                types = [_pg_type(declared, column, json_columns) for column, declared in columns]
                listed = ", ".join(f'"{c}" {t}' for (c, _), t in zip(columns, types, strict=True))
                await connection.execute(f'CREATE TABLE "{table}" ({listed})')
                marks = ", ".join(f"${i + 1}" for i in range(len(columns)))
                await connection.executemany(
                    f'INSERT INTO "{table}" VALUES ({marks})',
                    [tuple(_value(t, v) for t, v in zip(types, row, strict=True)) for row in rows],
                )
        finally:
            await connection.close()

    run_sync(copy)


def execute(url: str, *statements: str) -> None:
    """Run ``statements`` on the database at ``url``."""

    async def run() -> None:
        connection = await asyncpg.connect(url)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    run_sync(run)
