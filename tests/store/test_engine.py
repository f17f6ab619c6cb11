"""Engine setup: URL resolution, SQLite pragmas and transactions, PostgreSQL schemas."""

from __future__ import annotations

import gc
import os
import sqlite3
import weakref
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from store import HistoryStore
from store.errors import ChatledgerError, StoreError
from store.sql.dialect import kept_on
from store.sql.drivers.engine import (
    DEFAULT_URL,
    URL_ENV,
    create_engine,
    normalize_url,
    read_connection,
    resolve_url,
    write_connection,
)
from strategies.messages import Message, TextContent
from tests.conformance.test_library_strategies import long_result_chat
from tests.conftest import PgServer


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+asyncpg"),
        ("postgres://u@h/db", "postgresql+asyncpg"),
        ("postgresql+psycopg://u@h/db", "postgresql+asyncpg"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg"),
    ],
)
def test_urls_map_to_async_drivers(given: str, driver: str) -> None:
    url = normalize_url(given)
    assert url.drivername == driver
    assert url.database == make_database(given)


def make_database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def test_url_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    assert resolve_url(None) == DEFAULT_URL == "sqlite:///./chatledger.db"
    monkeypatch.setenv(URL_ENV, "postgresql://env@h/db")
    assert resolve_url(None) == "postgresql://env@h/db"
    assert resolve_url("sqlite:///arg.db") == "sqlite:///arg.db"


async def test_sqlite_connection_setup(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/e.db")
    try:
        async with engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
            assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar_one() > 0
    finally:
        await engine.dispose()


async def test_sqlite_write_transactions_take_the_lock_at_begin(tmp_path: Path) -> None:
    """A write transaction holds the write lock from BEGIN; reads stay deferred."""
    path = tmp_path / "lock.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER)"))
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            async with engine.connect() as reader, reader.begin():
                await reader.execute(text("SELECT * FROM t"))
                other.execute("BEGIN IMMEDIATE")  # a deferred reader does not block writers
                other.execute("ROLLBACK")
            async with write_connection(engine):
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_postgres_schema_option(pg_server: PgServer) -> None:
    db_url = pg_server.create(f"chatledger_schema_{os.getpid()}")
    try:
        await _two_schemas(db_url)
    finally:
        pg_server.drop_later(make_database(db_url))


async def _two_schemas(db_url: str) -> None:
    message = Message.text_message("user", "hi")
    async with (
        HistoryStore.open(db_url, schema="tenant_one") as one,
        HistoryStore.open(db_url, schema="tenant_two") as two,
    ):
        await one.append("s", [message])
        assert await two.sessions() == []
        async with one.engine.connect() as conn:
            found = await conn.execute(
                text(
                    "SELECT table_schema FROM information_schema.tables "
                    "WHERE table_name = 'chatledger_messages' ORDER BY table_schema"
                )
            )
            assert [row[0] for row in found] == ["tenant_one", "tenant_two"]
            assert (await conn.execute(text("SHOW search_path"))).scalar() == "tenant_one"


async def _transaction_ids(conn: AsyncConnection) -> int:
    """How many transactions two statements of ``conn`` ran in (PostgreSQL)."""
    first = (await conn.execute(text("SELECT pg_current_xact_id()::text"))).scalar()
    second = (await conn.execute(text("SELECT pg_current_xact_id()::text"))).scalar()
    return len({first, second})


async def test_reads_on_postgres_take_no_transaction(db_url: str, backend: str) -> None:
    """PostgreSQL's read committed gives each statement its own snapshot inside a
    transaction too: a read connection runs in autocommit, without a BEGIN and a
    ROLLBACK, each statement its own transaction.
    On SQLite the read transaction is kept: it is the snapshot of every read in it."""
    engine = create_engine(db_url)
    try:
        async with read_connection(engine) as conn:
            if backend == "sqlite":
                await conn.execute(text("SELECT 1"))
                raw = await conn.get_raw_connection()
                assert raw.driver_connection is not None
                assert raw.driver_connection._conn.in_transaction  # BEGIN was sent
            else:
                assert await _transaction_ids(conn) == 2
        async with engine.connect() as conn:  # the engine's own connections are unchanged
            if backend != "sqlite":
                assert await _transaction_ids(conn) == 1
    finally:
        await engine.dispose()


async def test_driver_errors_are_translated(tmp_path: Path) -> None:
    with pytest.raises(ChatledgerError):
        async with HistoryStore.open("postgresql://nobody@127.0.0.1:1/none"):
            pass
    async with HistoryStore.open(f"sqlite:///{tmp_path}/t.db") as store:
        await store.append("s", [Message.text_message("user", "hi")])
        async with store.engine.begin() as conn:
            await conn.execute(text("DROP TABLE chatledger_groups"))
        with pytest.raises(StoreError) as info:
            await store.history("s")
        assert not isinstance(info.value, DBAPIError)
        assert isinstance(info.value.__cause__, DBAPIError)


async def test_a_returned_view_translates_driver_errors(store: HistoryStore) -> None:
    await store.append("s", long_result_chat())
    view = await store.view("s")
    async with store.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE chatledger_messages RENAME TO chatledger_gone"))
    with pytest.raises(StoreError) as info:
        await view.project()
    assert info.value.__cause__ is not None


def test_what_is_kept_for_a_dialect_goes_with_it() -> None:
    """A cache kept on a dialect holds what refers back to it (bind processors close
    over it) and still goes when the dialect does."""

    def compiled() -> weakref.ref[Any]:
        dialect = sqlite_dialect()
        cache = kept_on(dialect, "test", dict)
        cache["processor"] = lambda value: (dialect, value)
        assert kept_on(dialect, "test", dict) is cache
        return weakref.ref(dialect)

    gone = compiled()
    gc.collect()
    assert gone() is None


async def test_stores_opened_one_after_another_do_not_keep_their_dialects(
    tmp_path: Path,
) -> None:
    """Each store compiles its statements for its engine's dialect; closed, the store
    leaves nothing of it behind (every one was kept, about 80 kB a store, before)."""
    dialects: list[weakref.ref[Any]] = []
    for number in range(30):
        async with HistoryStore.open(f"sqlite:///{tmp_path}/kept.db") as store:
            for text_ in (f"turn {number}", f"again {number}"):
                said = Message(role="user", contents=[TextContent(text=text_)])
                await store.append("s", [said])
            await store.context("s")
            dialects.append(weakref.ref(store._engine.sync_engine.dialect))
    gc.collect()
    alive = sum(ref() is not None for ref in dialects)
    assert alive < 15  # not one a store: only the last few may still be on their way out
