"""Statements compiled once and bound in advance: SQLAlchemy's answers, without its
execution machinery, and SQLAlchemy's own way for whatever cannot be prepared."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from store.sql.engine import create_engine, write_connection
from store.sql.prepared import PreparedResult
from store.sql.schema import UTCDateTime
from store.sql.sqlite_driver import short_statements

_TABLE = Table(
    "prepared_items",
    MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String, unique=True),
    Column("flag", Boolean),
    Column("at", UTCDateTime()),
    Column("data", JSON),
)

_INSERT = insert(_TABLE)
_RENAME = (
    update(_TABLE)
    .where(_TABLE.c.id == bindparam("item"))
    .values(name=bindparam("new_name"), flag=True)
)
_READ = select(
    _TABLE.c.id, _TABLE.c.name.label("label"), _TABLE.c.flag, _TABLE.c.at, _TABLE.c.data
).where(_TABLE.c.id >= bindparam("low"))
_AMONG = select(_TABLE.c.id).where(_TABLE.c.id.in_(bindparam("ids", expanding=True)))

_AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _item(number: int) -> dict[str, Any]:
    return {
        "id": number,
        "name": f"item {number}",
        "flag": number % 2 == 0,
        "at": _AT,
        "data": {"n": number, "list": [1, "two", None]},
    }


async def _script(engine: AsyncEngine) -> tuple[list[Any], list[bool]]:
    """Every prepared shape, each statement run twice (a statement is prepared when it
    comes back): what each returned, and whether each result was a prepared one."""
    seen: list[Any] = []
    prepared: list[bool] = []

    def keep(result: Any, value: Any) -> None:
        seen.append(value)
        prepared.append(isinstance(result, PreparedResult))

    async with engine.begin() as conn:
        await conn.run_sync(_TABLE.metadata.create_all)
    with short_statements():
        for round_ in range(2):
            async with write_connection(engine) as conn:
                one = await conn.execute(_INSERT, _item(10 * round_ + 1))
                keep(one, one.rowcount)
                many = await conn.execute(_INSERT, [_item(10 * round_ + n) for n in (2, 3, 4)])
                keep(many, many.rowcount)
                renamed = await conn.execute(
                    _RENAME, {"item": 10 * round_ + 2, "new_name": f"x{round_}"}
                )
                keep(renamed, renamed.rowcount)
            async with engine.connect() as conn:
                rows = await conn.execute(_READ, {"low": 10 * round_})
                keep(rows, (list(rows.keys()), [tuple(r) for r in rows]))
                mapped = await conn.execute(_READ, {"low": 0})
                keep(mapped, [dict(m) for m in mapped.mappings().all()])
                one_row = await conn.execute(_READ, {"low": 14})
                keep(one_row, one_row.one_or_none())
                among = await conn.execute(_AMONG, {"ids": [1, 3, 12]})
                keep(among, among.scalars().all())
    return seen, prepared


async def test_prepared_statements_answer_as_sqlalchemy_does(tmp_path: Path) -> None:
    """A statement is prepared from its second run on (an expanding IN list never),
    and every answer equals SQLAlchemy's own, typed columns processed alike."""
    ours = create_engine(f"sqlite:///{tmp_path}/ours.db")
    stock = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/stock.db")
    try:
        seen, prepared = await _script(ours)
        expected, _ = await _script(stock)
        assert seen == expected
        # insert one, insert many, rename, read, read again (twice), an IN list
        assert prepared == [False, True, False, False, True, True, False] + [True] * 6 + [False]
        at = seen[3][1][0][3]
        assert at == _AT and at.tzinfo is UTC  # UTCDateTime's result processor ran
        assert seen[4][0]["data"] == {"n": 1, "list": [1, "two", None]}
    finally:
        await ours.dispose()
        await stock.dispose()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """The store's SQLite engine, with the table created."""
    made = create_engine(f"sqlite:///{tmp_path}/items.db")
    try:
        async with made.begin() as conn:
            await conn.run_sync(_TABLE.metadata.create_all)
        yield made
    finally:
        await made.dispose()


async def test_a_missing_parameter_is_sqlalchemys_error(engine: AsyncEngine) -> None:
    with short_statements():
        async with engine.connect() as conn:
            await conn.execute(_READ, {"low": 0})
            with pytest.raises(StatementError, match="low"):
                await conn.execute(_READ, {})


async def test_a_driver_error_is_raised_as_sqlalchemy_raises_it(engine: AsyncEngine) -> None:
    with short_statements():
        async with write_connection(engine) as conn:
            await conn.execute(_INSERT, _item(1))
            await conn.execute(_INSERT, _item(2))  # prepared: seen before
            with pytest.raises(IntegrityError):
                await conn.execute(_INSERT, {**_item(3), "name": "item 1"})


async def test_a_listened_engine_sees_every_statement(engine: AsyncEngine) -> None:
    """With a listener on the engine's statements nothing is prepared: it sees them all."""
    seen: list[str] = []
    event.listen(
        engine.sync_engine, "before_cursor_execute", lambda *a: seen.append(a[2].split()[0])
    )
    with short_statements():
        async with engine.connect() as conn:
            for _ in range(3):
                result = await conn.execute(_READ, {"low": 0})
                assert not isinstance(result, PreparedResult)
    assert seen.count("SELECT") == 3
