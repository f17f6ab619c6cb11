"""The one-hop aiosqlite adapter: the same answers as SQLAlchemy's, one call a statement."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from store._sqlite_driver import OneHopAiosqliteDBAPI
from store.engine import create_engine


async def _script(engine: AsyncEngine) -> list[Any]:
    """Statements of every kind; what each returned, as plain values."""
    seen: list[Any] = []
    async with engine.connect() as conn:
        await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"))
        one = await conn.execute(text("INSERT INTO t (name) VALUES ('a')"))
        seen.append((one.rowcount, one.lastrowid))
        many = await conn.execute(
            text("INSERT INTO t (name) VALUES (:n)"), [{"n": "b"}, {"n": "c"}, {"n": "d"}]
        )
        seen.append(many.rowcount)
        rows = await conn.execute(text("SELECT id, name AS label FROM t ORDER BY id"))
        seen.append((list(rows.keys()), [tuple(r) for r in rows]))
        empty = await conn.execute(text("SELECT id FROM t WHERE name = 'zz'"))
        seen.append((list(empty.keys()), empty.all()))
        updated = await conn.execute(text("UPDATE t SET name = name || '!' WHERE id > 2"))
        seen.append(updated.rowcount)
        await conn.commit()
        with pytest.raises(IntegrityError):
            await conn.execute(text("INSERT INTO t (name) VALUES ('a')"))
        await conn.rollback()
        await conn.execute(text("DELETE FROM t WHERE id = 1"))
        await conn.rollback()
        seen.append((await conn.execute(text("SELECT count(*) FROM t"))).scalar_one())
    return seen


async def test_answers_equal_sqlalchemys_own_adapter(tmp_path: Path) -> None:
    ours = create_engine(f"sqlite:///{tmp_path}/ours.db")
    stock = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/stock.db")
    try:
        assert isinstance(ours.dialect.dbapi, OneHopAiosqliteDBAPI)
        assert not isinstance(stock.dialect.dbapi, OneHopAiosqliteDBAPI)
        assert await _script(ours) == await _script(stock)
    finally:
        await ours.dispose()
        await stock.dispose()


async def test_one_call_on_the_driver_thread_per_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    original = aiosqlite.Connection._execute

    async def counting(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counting)
    engine = create_engine(f"sqlite:///{tmp_path}/count.db")
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
            calls.clear()
            await conn.execute(text("SELECT 1"))
            assert calls == ["_run"]
    finally:
        await engine.dispose()
