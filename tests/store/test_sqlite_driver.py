"""The SQLite adapter: the same answers as SQLAlchemy's; on aiosqlite's thread, what may wait."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.util.concurrency import in_greenlet

from store import HistoryStore
from store.contract import PAGE_SIZE
from store.sql.drivers.engine import WRITE_OPTION, create_engine, write_connection
from store.sql.drivers.sqlite import (
    INLINE_ROWS,
    OneHopAiosqliteDBAPI,
    rows_at_once,
    short_statements,
)
from store.sql.history import _page_statement, read_page_rows
from store.sql.mapping import page_mapper
from store.sql.schema import MESSAGES
from strategies.messages import Message


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


@pytest.fixture
def thread_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The functions run on aiosqlite's thread, by name."""
    calls: list[str] = []
    original = aiosqlite.Connection._execute

    async def counting(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "")
        calls.append(name)
        return await original(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counting)
    return calls


async def test_short_statements_that_cannot_wait_stay_on_the_loop_thread(
    tmp_path: Path, thread_calls: list[str]
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/count.db")
    try:
        async with write_connection(engine) as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)"))
        thread_calls.clear()
        async with engine.connect() as conn:  # outside short_statements(): the thread
            await conn.execute(text("SELECT count(*) FROM t"))
        assert thread_calls == ["_run_handed", "_run_handed"]  # BEGIN, SELECT
        thread_calls.clear()
        with short_statements():
            async with engine.connect() as conn:  # a read: BEGIN, SELECT, ROLLBACK
                await conn.execute(text("SELECT count(*) FROM t"))
            assert thread_calls == []
            async with write_connection(engine) as conn:
                assert thread_calls == []  # BEGIN IMMEDIATE found the lock free: inline
                await conn.execute(text("INSERT INTO t (name) VALUES ('a')"))
                small = [{"n": str(i)} for i in range(INLINE_ROWS)]
                await conn.execute(text("INSERT INTO t (name) VALUES (:n)"), small)
                assert thread_calls == []  # writes under the lock: inline
                bulk = [{"n": str(i)} for i in range(INLINE_ROWS + 1)]
                await conn.execute(text("INSERT INTO t (name) VALUES (:n)"), bulk)
                assert thread_calls == ["_run_handed"]  # a bulk insert: thread
            assert thread_calls == ["_run_handed"]  # a commit never waits for a lock: inline
            async with engine.connect() as conn:
                count = (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one()
            assert count == 1 + 2 * INLINE_ROWS + 1  # committed
            thread_calls.clear()
            async with engine.connect() as conn:  # a write outside BEGIN IMMEDIATE may wait
                await conn.execute(text("DELETE FROM t WHERE id = 1"))
                await conn.commit()
            assert thread_calls == ["_run_handed"]  # the DELETE (may wait); its commit is inline
    finally:
        await engine.dispose()


async def test_begin_immediate_waits_on_the_thread_when_another_holds_the_lock(
    tmp_path: Path, thread_calls: list[str]
) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/held.db")
    other = create_engine(f"sqlite:///{tmp_path}/held.db")
    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with write_connection(other) as conn:
            await conn.execute(text("INSERT INTO t (name) VALUES ('first')"))
            holding.set()
            await release.wait()

    async def writer() -> list[str]:
        await holding.wait()
        thread_calls.clear()
        asyncio.get_running_loop().call_later(0.2, release.set)
        async with write_connection(engine) as conn:  # waits on the thread, loop free
            seen = list(thread_calls)
            await conn.execute(text("INSERT INTO t (name) VALUES ('second')"))
        return seen

    try:
        async with write_connection(engine) as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)"))
        with short_statements():
            _, seen = await asyncio.wait_for(asyncio.gather(holder(), writer()), timeout=20)
        assert seen == ["_run_handed"]  # the inline try met the lock: BEGIN IMMEDIATE on the thread
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT name FROM t ORDER BY id"))).scalars().all()
        assert rows == ["first", "second"]
        async with engine.connect() as conn:  # the busy timeout is the store's again
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() > 0
    finally:
        await engine.dispose()
        await other.dispose()


async def test_without_wal_every_statement_goes_to_the_thread(thread_calls: list[str]) -> None:
    engine = create_engine("sqlite://")  # in memory: no WAL
    try:
        with short_statements():
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
                thread_calls.clear()
                await conn.execute(text("SELECT 1"))
                assert thread_calls == ["_run_handed"]
    finally:
        await engine.dispose()


async def test_a_writer_waiting_for_the_lock_does_not_block_the_loop(tmp_path: Path) -> None:
    """The lock holder must get to commit while the other writer waits for the lock."""
    engine = create_engine(f"sqlite:///{tmp_path}/lock.db")
    order: list[str] = []
    holding = asyncio.Event()

    async def holder() -> None:
        async with write_connection(engine) as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
            holding.set()
            for _ in range(5):  # yields to the loop while holding the lock
                await asyncio.sleep(0.01)
            order.append("holder commits")

    async def waiter() -> None:
        await holding.wait()
        async with write_connection(engine) as conn:
            order.append("waiter has the lock")
            await conn.execute(text("INSERT INTO t DEFAULT VALUES"))

    try:
        with short_statements():
            await asyncio.wait_for(asyncio.gather(holder(), waiter()), timeout=20)
        assert order == ["holder commits", "waiter has the lock"]
    finally:
        await engine.dispose()


def test_an_appends_insert_slices_fit_inline() -> None:
    from store.sql.append.inserts import INSERT_CHUNK

    assert INSERT_CHUNK <= INLINE_ROWS


_TABLE = Table(
    "t",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("name", String, unique=True),
)


async def _core_script(engine: AsyncEngine) -> list[Any]:
    """SQLAlchemy Core statements of every kind, short ones; what each returned."""
    seen: list[Any] = []
    async with engine.begin() as conn:
        await conn.run_sync(_TABLE.metadata.create_all)
    with short_statements():
        async with write_connection(engine) as conn:
            one = await conn.execute(insert(_TABLE).values(name="a"))
            seen.append((one.rowcount, one.inserted_primary_key))
            many = await conn.execute(insert(_TABLE), [{"name": n} for n in "bcd"])
            seen.append(many.rowcount)
            renamed = update(_TABLE).where(_TABLE.c.id > 2).values(name=_TABLE.c.name + "!")
            seen.append((await conn.execute(renamed)).rowcount)
            with pytest.raises(IntegrityError):
                await conn.execute(insert(_TABLE).values(name="a"))
            seen.append((await conn.execute(delete(_TABLE).where(_TABLE.c.id == 1))).rowcount)
        async with engine.connect() as conn:
            rows = await conn.execute(select(_TABLE.c.id, _TABLE.c.name).order_by(_TABLE.c.id))
            seen.append((list(rows.keys()), [tuple(r) for r in rows]))
            seen.append((await conn.execute(select(func.count()).select_from(_TABLE))).scalar())
    return seen


async def test_short_core_statements_skip_the_greenlet_with_the_same_answers(
    tmp_path: Path,
) -> None:
    """Inside short_statements() a Core SELECT, and a write under the write lock, run in
    the caller's own frame (no greenlet), and answer as SQLAlchemy's own adapter does."""
    ours = create_engine(f"sqlite:///{tmp_path}/ours.db")
    stock = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/stock.db")
    where: list[tuple[str, bool]] = []

    def record(*args: Any) -> None:
        statement = args[2]
        where.append((statement.split()[0].upper(), in_greenlet()))

    event.listen(ours.sync_engine, "before_cursor_execute", record)
    try:
        assert await _core_script(ours) == await _core_script(stock)
        dml = ("SELECT", "INSERT", "UPDATE", "DELETE")
        short = {(verb, inside) for verb, inside in where if verb in dml}
        assert short == {(verb, False) for verb in dml}
        assert ("CREATE", True) in where  # DDL, outside short_statements(): SQLAlchemy's way
    finally:
        await ours.dispose()
        await stock.dispose()


async def test_a_first_statement_that_would_begin_a_write_takes_the_greenlet(
    tmp_path: Path,
) -> None:
    """A write connection whose transaction is not begun yet (its first statement would
    issue BEGIN IMMEDIATE, which may wait for the lock) goes SQLAlchemy's way."""
    engine = create_engine(f"sqlite:///{tmp_path}/first.db")
    where: list[tuple[str, bool]] = []
    event.listen(
        engine.sync_engine,
        "before_cursor_execute",
        lambda *args: where.append((args[2].split()[0].upper(), in_greenlet())),
    )
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_TABLE.metadata.create_all)
        writer = engine.execution_options(**{WRITE_OPTION: True})
        with short_statements():
            async with writer.connect() as conn:
                where.clear()
                await conn.execute(select(_TABLE.c.id))  # begins the write transaction
                await conn.execute(select(_TABLE.c.id))
                await conn.commit()
        # the connection's first write turns secure_delete on before it begins
        assert where == [("PRAGMA", True), ("BEGIN", True), ("SELECT", True), ("SELECT", False)]
    finally:
        await engine.dispose()


async def test_a_connection_closes_at_once_into_a_pool_with_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside short_statements() a connection goes back to the pool synchronously,
    rolled back; one the pool has no room for is closed SQLAlchemy's way."""
    engine = create_engine(f"sqlite:///{tmp_path}/close.db")
    slow: list[bool] = []
    original = AsyncConnection.close

    async def counting(self: AsyncConnection) -> None:
        slow.append(True)
        await original(self)

    try:
        async with engine.begin() as conn:
            await conn.run_sync(_TABLE.metadata.create_all)
        monkeypatch.setattr(AsyncConnection, "close", counting)
        writer = engine.execution_options(**{WRITE_OPTION: True})
        with short_statements():
            conn = await writer.connect().start()
            await conn.execute(insert(_TABLE).values(name="dropped"))
            await conn.close()  # uncommitted: rolled back, the write lock let go
            async with write_connection(engine) as conn:
                await conn.execute(insert(_TABLE).values(name="kept"))
            assert slow == []
            size = engine.sync_engine.pool.size()  # type: ignore[attr-defined]
            conns = [await engine.connect().start() for _ in range(size + 1)]
            for conn in conns:
                await conn.execute(select(_TABLE.c.name))
                await conn.close()
            assert slow == [True]  # the one the pool had no room for
            async with engine.connect() as conn:
                names = (await conn.execute(select(_TABLE.c.name))).scalars().all()
        assert names == ["kept"]
    finally:
        await engine.dispose()


async def _page_rows(store: HistoryStore) -> list[Any]:
    async with store.engine.connect() as conn:
        with short_statements():
            await conn.execute(select(func.count()).select_from(MESSAGES))  # begins the read
            rows = await read_page_rows(
                conn,
                store.tenant,
                "s",
                include_excluded=True,
                after=None,
                before=None,
                limit=PAGE_SIZE,
            )
    return list(rows)


async def test_a_page_of_history_is_read_as_the_drivers_tuples(tmp_path: Path) -> None:
    """Inside short_statements() a history page is read straight from sqlite3 (its plain
    tuples, no result object) and maps to what SQLAlchemy's own read maps to."""
    async with HistoryStore.open(f"sqlite:///{tmp_path}/page.db") as store:
        await store.append("s", [Message.text_message("user", f"m{i}") for i in range(5)])
        rows = await _page_rows(store)
        assert [type(row) for row in rows] == [tuple] * 5
        async with store.engine.connect() as conn:  # SQLAlchemy's own execution and Rows
            stock = list(
                (await conn.execute(_page_statement(True, False), _page_values(store))).all()
            )
        mapped = page_mapper(store.tenant, "s")
        assert [mapped(row) for row in rows] == [mapped(row) for row in stock]
        assert [mapped(row) for row in rows] == await store.history("s", include_excluded=True)


def _page_values(store: HistoryStore) -> dict[str, Any]:
    return {"tenant": store.tenant, "session_id": "s", "after": 0, "limit": PAGE_SIZE}


async def test_a_listened_engine_sees_every_history_read(tmp_path: Path) -> None:
    """With a statement listener on the engine, history pages take SQLAlchemy's way, so
    that the listener sees them (and rows_at_once declines)."""
    async with HistoryStore.open(f"sqlite:///{tmp_path}/listened.db") as store:
        await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
        seen: list[str] = []
        listener = lambda *args: seen.append(args[2])  # noqa: E731
        event.listen(store.engine.sync_engine, "before_cursor_execute", listener)
        try:
            async with store.engine.connect() as conn:
                with short_statements():
                    await conn.execute(select(func.count()).select_from(MESSAGES))
                    assert rows_at_once(conn, "SELECT 1", ()) is None
            assert len([m async for m in store.aiter_history("s")]) == 3
        finally:
            event.remove(store.engine.sync_engine, "before_cursor_execute", listener)
        assert any("FROM chatledger_messages" in s and "LIMIT" in s for s in seen)
        assert len(await _page_rows(store)) == 3


async def test_a_driver_read_error_is_the_stores_own(tmp_path: Path) -> None:
    """A statement the driver refuses raises SQLAlchemy's error for the store to
    translate, never sqlite3's own."""
    engine = create_engine(f"sqlite:///{tmp_path}/error.db")
    try:
        async with engine.connect() as conn:
            with short_statements():
                await conn.execute(text("SELECT 1"))
                with pytest.raises(OperationalError, match="no such table"):
                    rows_at_once(conn, "SELECT x FROM missing", ())
    finally:
        await engine.dispose()
