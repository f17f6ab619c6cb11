"""Statements compiled once and bound in advance: SQLAlchemy's answers, without its
execution machinery, and SQLAlchemy's own way for whatever cannot be prepared (on
SQLite, on the loop's thread; on PostgreSQL, on asyncpg directly)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    event,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from store.sql.drivers.engine import create_engine, normalize_url, write_connection
from store.sql.drivers.prepared import PreparedResult
from store.sql.drivers.sqlite import short_statements
from store.sql.schema import UTCDateTime
from tests.conftest import PgServer, _unique_name

_TABLE = Table(
    "prepared_items",
    MetaData(),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String, unique=True),
    Column("flag", Boolean),
    Column("at", UTCDateTime()),
    Column("data", JSON),
    Column("ratio", Float),
)

_INSERT = insert(_TABLE)
_RENAME = (
    update(_TABLE)
    .where(_TABLE.c.id == bindparam("item"))
    .values(name=bindparam("new_name"), flag=True)
)
_READ = select(
    _TABLE.c.id,
    _TABLE.c.name.label("label"),
    _TABLE.c.flag,
    _TABLE.c.at,
    _TABLE.c.data,
    _TABLE.c.ratio,
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
        "ratio": number / 4,
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


@pytest.fixture
def urls(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Two empty databases of the backend under test (throwaway ones on PostgreSQL)."""
    if backend == "sqlite":
        yield [f"sqlite:///{tmp_path}/ours.db", f"sqlite:///{tmp_path}/stock.db"]
        return
    server: PgServer = request.getfixturevalue("pg_server")
    names = [_unique_name("chatledger_e") for _ in range(2)]
    try:
        yield [server.create(name) for name in names]
    finally:
        for name in names:
            server.drop_later(name)


# insert one, insert many, rename, read, read again (twice), an IN list; two rounds.
# SQLite and asyncpg prepare the same: a statement object from its second run on (the
# insert of many rows is the insert of one, run again), an expanding IN list never
_PREPARED = [False, True, False, False, True, True, False] + [True] * 6 + [False]


async def test_prepared_statements_answer_as_sqlalchemy_does(urls: list[str]) -> None:
    """A statement is prepared from its second run on (an expanding IN list never),
    and every answer equals SQLAlchemy's own, typed columns processed alike."""
    ours = create_engine(urls[0])
    stock = create_async_engine(normalize_url(urls[1]))
    try:
        seen, prepared = await _script(ours)
        expected, _ = await _script(stock)
        assert seen == expected
        assert prepared == _PREPARED
        at = seen[3][1][0][3]
        assert at == _AT and at.tzinfo is UTC  # UTCDateTime's result processor ran
        assert seen[4][0]["data"] == {"n": 1, "list": [1, "two", None]}
        assert seen[4][0]["ratio"] == 0.25 and type(seen[4][0]["ratio"]) is float
    finally:
        await ours.dispose()
        await stock.dispose()


@pytest.fixture
async def engine(urls: list[str]) -> AsyncIterator[AsyncEngine]:
    """The store's engine for the backend under test, with the table created."""
    made = create_engine(urls[0])
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


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_a_lost_connection_is_invalidated_as_sqlalchemy_does(engine: AsyncEngine) -> None:
    """The server ends the connection under a prepared statement: the error is
    SQLAlchemy's, saying the connection was invalidated, and the pool gives a working
    connection afterwards."""
    async with engine.connect() as conn:
        await conn.execute(_READ, {"low": 0})
        assert isinstance(await conn.execute(_READ, {"low": 0}), PreparedResult)
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with engine.connect() as other:
            await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with pytest.raises(DBAPIError) as raised:
            await conn.execute(_READ, {"low": 0})
        assert raised.value.connection_invalidated
    async with engine.connect() as conn:
        assert (await conn.execute(_READ, {"low": 0})).all() == []
