"""Every write behind a lock that another client holds gives up with
:class:`~store.errors.StoreTimeout` at the store's timeout, writes nothing, and succeeds
once the lock is gone, on SQLite (a writer's ``BEGIN IMMEDIATE``) and PostgreSQL (a
client idle in a transaction holding the session's row).

``tests/reliability/test_lifecycle.py`` holds the same for ``append``, and
``test_hostile_input.py`` for a read behind SQLite's exclusive lock.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from store import HistoryStore
from store.errors import StoreTimeout
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.cli.helpers import conversation
from tests.conftest import POOLED_BACKENDS, _asyncpg_dsn


@pytest.fixture(params=POOLED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite, PostgreSQL, and PostgreSQL through PgBouncer in transaction mode."""
    return str(request.param)


TIMEOUT = 0.2
WINDOW = "sliding-window:keep_last_turns=1"

WRITES: list[tuple[str, Callable[[HistoryStore, dict[str, str]], Awaitable[object]]]] = [
    ("set_metadata", lambda s, _: s.set_metadata("s", {"k": 1})),
    ("compact", lambda s, _: s.compact("s", WINDOW)),
    ("pin", lambda s, ids: s.pin("s", [ids["group"]])),
    ("restore", lambda s, ids: s.restore("s", event_id=ids["event"])),
    ("redact", lambda s, ids: s.redact("s", [ids["message"]], reason="x")),
    ("recount", lambda s, _: s.recount("s")),
    ("import_messages", lambda s, _: s.import_messages("s", [Message.text_message("user", "i")])),
    ("retract_last", lambda s, _: s.retract_last("s")),
    ("delete_session", lambda s, _: s.delete_session("s")),
    ("purge", lambda s, _: s.purge(older_than=datetime.now(UTC) + timedelta(minutes=5))),
]


@asynccontextmanager
async def _held(url: str) -> AsyncIterator[None]:
    """Another client holding the lock a write of session ``s`` needs."""
    if url.startswith("sqlite"):
        holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            yield
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        return
    connection = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        idle = connection.transaction()
        await idle.start()
        await connection.execute(
            "SELECT 1 FROM chatledger_sessions WHERE session_id = 's' FOR UPDATE"
        )
        yield
        await idle.rollback()
    finally:
        await connection.close()


async def _state(store: HistoryStore) -> tuple[Any, ...]:
    return (
        await store.history("s", include_excluded=True),
        await store.audit("s"),
        await store.get_metadata("s"),
        await store.session("s"),
    )


async def test_every_write_behind_a_lock_times_out_and_writes_nothing(db_url: str) -> None:
    tokenizer = CharacterEstimatorTokenizer()
    async with HistoryStore.open(db_url, tokenizer=tokenizer, timeout=TIMEOUT) as store:
        await store.append("s", conversation(3))
        event = await store.compact("s", "sliding-window:keep_last_turns=2")
        assert event is not None
        history = await store.history("s", include_excluded=True)
        ids = {"event": event.id, "group": history[-1].group_id, "message": history[1].message_id}
        before = await _state(store)
        timed_out = []
        async with _held(db_url):
            for name, write in WRITES:
                try:
                    await asyncio.wait_for(write(store, ids), 60)
                except StoreTimeout:
                    timed_out.append(name)
        assert timed_out == [name for name, _ in WRITES]
        assert await _state(store) == before
        for _, write in WRITES:  # and each goes through once the lock is gone
            await write(store, ids)
        assert await store.sessions() == []
