"""A store's life: closed means closed, a new process or event loop gets fresh
connections, a dropped connection is reconnected once, and every wait has a deadline.

Each test is the reproduction of a failure found by probing the store: appends that
succeeded after ``aclose``, a forked child hanging or reading its parent's replies, a
call failing with "connection is closed" after the server dropped idle connections, an
append waiting forever behind a client idle in a transaction, and processes failing to
create one schema at the same time.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from store import HistoryStore, InMemoryHistoryStore
from store.contract import HistoryBackend
from store.errors import StoreClosed, StoreTimeout
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import PgServer, _asyncpg_dsn, _unique_name

TOKENIZER = CharacterEstimatorTokenizer()


def _hi(text: str = "hi") -> Message:
    return Message.text_message("user", text)


async def _drain(store: HistoryBackend) -> None:
    async for _ in store.aiter_history("s"):
        pass


CALLS: list[tuple[str, Callable[[HistoryBackend], Awaitable[object]]]] = [
    ("append", lambda s: s.append("s", [_hi()])),
    ("history", lambda s: s.history("s")),
    ("aiter_history", _drain),
    ("sessions", lambda s: s.sessions()),
    ("session", lambda s: s.session("s")),
    ("get_metadata", lambda s: s.get_metadata("s")),
    ("set_metadata", lambda s: s.set_metadata("s", {"k": 1})),
    ("delete_session", lambda s: s.delete_session("s")),
    ("recount", lambda s: s.recount("s")),
    ("view", lambda s: s.view("s")),
    ("context", lambda s: s.context("s")),
    ("compact", lambda s: s.compact("s", "sliding_window:keep_last_groups=1")),
    ("audit", lambda s: s.audit("s")),
    ("excluded", lambda s: s.excluded("s")),
    ("why", lambda s: s.why("s", "m")),
    ("stats", lambda s: s.stats("s")),
    ("restore", lambda s: s.restore("s", group_ids=["group_m"])),
    ("pin", lambda s: s.pin("s", ["group_m"])),
    ("unpin", lambda s: s.unpin("s", ["group_m"])),
    ("import_messages", lambda s: s.import_messages("s", [_hi()])),
]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """A fresh database URL of each SQL backend, or None for the memory store."""
    if request.param == "memory":
        yield None
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/life.db"
    else:
        server: PgServer = request.getfixturevalue("pg_server")
        name = server.clone()
        yield server.url_for(name)
        server.drop_later(name)


async def _open(url: str | None, **options: Any) -> HistoryBackend:
    if url is None:
        return InMemoryHistoryStore(tokenizer=TOKENIZER)
    return await HistoryStore.open(url, tokenizer=TOKENIZER, **options)


async def _connections_to(dsn: str, database: str) -> int:
    """Client connections to ``database`` other than the one counting them."""
    conn = await asyncpg.connect(dsn)
    try:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
        return int(count)
    finally:
        await conn.close()


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
async def test_every_call_after_aclose_raises_store_closed(
    any_url: str | None, name: str, call: Callable[[HistoryBackend], Awaitable[object]]
) -> None:
    store = await _open(any_url)
    await store.append("s", [Message.text_message("user", "kept", message_id="m")])
    await store.aclose()
    await store.aclose()  # closing twice is harmless
    with pytest.raises(StoreClosed, match="closed"):
        await call(store)
    reopened = await _open(any_url)
    try:
        if any_url is not None:  # the closed store wrote nothing
            assert [m.message_id for m in await reopened.history("s")] == ["m"]
    finally:
        await reopened.aclose()


@pytest.mark.postgres
async def test_a_closed_store_holds_no_connection(pg_server: PgServer) -> None:
    name = pg_server.clone()
    try:
        store = await HistoryStore.open(pg_server.url_for(name), tokenizer=TOKENIZER)
        for index in range(5):
            await store.append(f"s{index}", [_hi()])
        await store.aclose()
        for index in range(5):
            with pytest.raises(StoreClosed):
                await store.append(f"s{index}", [_hi()])
        assert await _connections_to(_asyncpg_dsn(pg_server.url_for(name)), name) == 0
    finally:
        pg_server.drop_later(name)


# asyncpg connections of a finished loop cannot be closed from another one: the store
# drops them and the garbage collector closes their sockets, with ResourceWarning
# "unclosed ..." (SQLite's are closed cleanly, and stay checked by the "error" filter)
DEAD_LOOP_SOCKETS = pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning")


@DEAD_LOOP_SOCKETS
def test_a_store_works_in_a_second_event_loop(any_url: str | None) -> None:
    store = asyncio.run(_open(any_url))
    asyncio.run(store.append("s", [_hi("first loop")]))
    asyncio.run(store.append("s", [_hi("second loop")]))

    async def read_and_close() -> list[str]:
        try:
            return [m.message.text for m in await store.history("s")]
        finally:
            await store.aclose()

    assert asyncio.run(read_and_close()) == ["first loop", "second loop"]
    gc.collect()  # while the warning filter above applies


def _wait_for_child(pid: int, seconds: float) -> int:
    """The child's exit code; kill it and fail if it has not exited within ``seconds``."""
    for _ in range(int(seconds * 20)):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        asyncio.run(asyncio.sleep(0.05))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child still ran after {seconds:g} s")


@DEAD_LOOP_SOCKETS
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_forked_child_gets_its_own_connections(db_url: str) -> None:
    store = asyncio.run(_open(db_url))
    asyncio.run(store.append("s", [_hi("before the fork")]))
    pid = os.fork()
    if pid == 0:  # the child: its own loop, its own connections, then out at once
        code = 1
        try:

            async def child() -> None:
                await store.append("s", [_hi("from the child")])
                texts = [m.message.text for m in await store.history("s")]
                assert texts == ["before the fork", "from the child"], texts

            asyncio.run(child())
            code = 0
        finally:
            os._exit(code)
    assert _wait_for_child(pid, 120) == 0

    async def parent() -> list[str]:  # the parent's connections were left alone
        try:
            await store.append("s", [_hi("from the parent")])
            return [m.message.text for m in await store.history("s")]
        finally:
            await store.aclose()

    assert asyncio.run(parent()) == ["before the fork", "from the child", "from the parent"]
    gc.collect()  # while the warning filter above applies


@pytest.mark.postgres
async def test_a_call_after_the_server_dropped_the_connections_succeeds(
    pg_server: PgServer,
) -> None:
    name = pg_server.clone()
    try:
        async with HistoryStore.open(pg_server.url_for(name), tokenizer=TOKENIZER) as store:
            await store.append("s", [_hi("before")])
            await store.history("s")
            admin = await asyncpg.connect(_asyncpg_dsn(pg_server.url_for(name)))
            try:
                killed = await admin.fetchval(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                    "pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()) k",
                    name,
                )
            finally:
                await admin.close()
            assert killed >= 1  # the pool's idle connection was among them
            await store.append("s", [_hi("after")])
            assert [m.message.text for m in await store.history("s")] == ["before", "after"]
    finally:
        pg_server.drop_later(name)


@pytest.mark.postgres
async def test_an_append_behind_an_idle_transaction_times_out(pg_server: PgServer) -> None:
    name = pg_server.clone()
    try:
        url = pg_server.url_for(name)
        async with HistoryStore.open(url, tokenizer=TOKENIZER, timeout=0.5) as store:
            await store.append("s", [_hi("before")])
            holder = await asyncpg.connect(_asyncpg_dsn(url))
            try:
                idle = holder.transaction()
                await idle.start()
                await holder.execute(
                    "SELECT 1 FROM chatledger_sessions WHERE session_id = 's' FOR UPDATE"
                )
                with pytest.raises(StoreTimeout, match="timeout"):
                    await asyncio.wait_for(store.append("s", [_hi("blocked")]), 60)
                await idle.rollback()
            finally:
                await holder.close()
            await store.append("s", [_hi("after")])  # nothing half-written in between
            assert [m.message.text for m in await store.history("s")] == ["before", "after"]
    finally:
        pg_server.drop_later(name)


async def test_an_append_behind_a_sqlite_writer_times_out(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    async with HistoryStore.open(str(path), tokenizer=TOKENIZER, timeout=0.5) as store:
        await store.append("s", [_hi("before")])
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreTimeout, match="locked"):
                await asyncio.wait_for(store.append("s", [_hi("blocked")]), 60)
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        await store.append("s", [_hi("after")])
        assert [m.message.text for m in await store.history("s")] == ["before", "after"]


OPEN_AND_APPEND = textwrap.dedent(
    """
    import asyncio, sys
    from store import HistoryStore
    from strategies.messages import Message
    from strategies.tokenizers import CharacterEstimatorTokenizer

    async def main(url: str, session: str) -> None:
        async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
            await store.append(session, [Message.text_message("user", "hi")])

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.fixture
def empty_url(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[str]:
    """An empty database (no schema) of the backend under test."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = _unique_name("chatledger_race")
    url = server.create(name)
    yield url
    server.drop_later(name)


def test_processes_creating_one_schema_at_once_all_succeed(empty_url: str) -> None:
    """Eight processes open one empty database together: each waits for the one
    creating the schema (within its deadline) and none fails."""
    root = Path(__file__).resolve().parents[2]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_APPEND, empty_url, f"s{index}"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(8)
    ]
    failures = []
    for child in children:
        _, err = child.communicate(timeout=300)
        if child.returncode != 0:
            failures.append(err.strip().splitlines()[-1:] or [f"exit {child.returncode}"])
    assert failures == []

    async def sessions() -> int:
        async with HistoryStore.open(empty_url, tokenizer=TOKENIZER, create=False) as store:
            return len(await store.sessions())

    assert asyncio.run(sessions()) == 8
