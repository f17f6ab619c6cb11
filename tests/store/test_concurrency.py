"""Concurrent writers (tasks and processes) lose nothing, duplicate nothing, keep seq gapless."""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from store import HistoryStore
from store.errors import ConcurrentWriteError
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import POOLED_BACKENDS
from tests.store.helpers import comparable, expected_groups, group_rows, open_call_rows
from tests.store.writer import round_messages, run, write


@pytest.fixture(params=POOLED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite, PostgreSQL, and PostgreSQL through PgBouncer in transaction mode."""
    return str(request.param)


WRITERS = 8
ROUNDS = 4


async def _check_session(store: HistoryStore, session_id: str, writers: list[str]) -> None:
    stored = await store.history(session_id)
    assert [m.seq for m in stored] == list(range(1, len(stored) + 1))
    ids = [m.message_id for m in stored]
    assert len(ids) == len(set(ids))
    for writer in writers:
        expected = [
            m.message_id
            for index in range(ROUNDS)
            for batch in round_messages(writer, index)
            for m in batch
        ]
        assert [i for i in ids if i.startswith(f"{writer}-")] == expected
    assert len(ids) == len(writers) * ROUNDS * 3
    # the groups are those of annotating the stored order at once
    messages = [m.message for m in stored]
    assert comparable(await group_rows(store, session_id)) == expected_groups(store, messages)
    assert await open_call_rows(store, session_id) == {}
    info = await store.session(session_id)
    assert info.stored_messages == len(stored)
    assert info.stored_tokens == sum(m.token_count for m in stored)


@pytest.mark.parametrize("across", [False, True], ids=["one-session", "across-sessions"])
async def test_tasks(store: HistoryStore, across: bool) -> None:
    writers = [f"w{i}" for i in range(WRITERS)]
    await asyncio.gather(*(write(store, f"s-{w}" if across else "s", w, ROUNDS) for w in writers))
    if across:
        for writer in writers:
            await _check_session(store, f"s-{writer}", [writer])
    else:
        await _check_session(store, "s", writers)


@pytest.mark.slow
@pytest.mark.parametrize("across", [False, True], ids=["one-session", "across-sessions"])
async def test_processes(db_url: str, across: bool) -> None:
    """8 writer processes (a forkserver that preloads the library, so startup stays cheap)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.store.writer"])
    writers = [f"p{i}" for i in range(WRITERS)]
    procs = [
        context.Process(target=run, args=(db_url, f"s-{w}" if across else "s", w, ROUNDS))
        for w in writers
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        await asyncio.to_thread(proc.join, 120)
        assert proc.exitcode == 0
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        if across:
            for writer in writers:
                await _check_session(store, f"s-{writer}", [writer])
        else:
            await _check_session(store, "s", writers)


def _busy() -> OperationalError:
    return OperationalError("BEGIN IMMEDIATE", {}, sqlite3.OperationalError("database is locked"))


async def test_retries_then_gives_up(store: HistoryStore) -> None:
    bounded = HistoryStore(store.engine, max_attempts=3)
    calls = 0

    async def flaky(conn: AsyncConnection) -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise _busy()
        return "done"

    assert await bounded._write(flaky) == "done"
    assert calls == 3

    async def always_busy(conn: AsyncConnection) -> None:
        raise _busy()

    with pytest.raises(ConcurrentWriteError, match="3 attempts"):
        await bounded._write(always_busy)
