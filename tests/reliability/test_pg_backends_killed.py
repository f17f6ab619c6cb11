"""PostgreSQL's server ends the store's connections again and again
(``pg_terminate_backend``, as a failover or an administrator does) while it appends and
compacts.

A call fails only with a :class:`~store.errors.ChatledgerError`, never a driver's
exception; an append that failed is stored whole or not at all, so that repeating it
stores it once; every acknowledged append is stored once, in order; the store works
again as soon as the kills stop, and ``doctor`` finds nothing.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from store import ChatledgerError, HistoryStore
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import PgServer, _asyncpg_dsn

pytestmark = pytest.mark.postgres

SECONDS = 2.5
KILL_EVERY = 0.25
SESSIONS = ("k0", "k1", "k2")


def _turn(n: int) -> list[Message]:
    return [
        Message.text_message("user", f"question {n} " + "words " * 20, message_id=f"{n}-u"),
        Message.text_message("assistant", f"answer {n} " + "words " * 20, message_id=f"{n}-a"),
    ]


async def _kill_backends(dsn: str, database: str, stop: asyncio.Event) -> int:
    """End every connection to ``database`` each :data:`KILL_EVERY` s until ``stop``."""
    killed = 0
    admin = await asyncpg.connect(dsn)
    try:
        while not stop.is_set():
            killed += await admin.fetchval(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()) k",
                database,
            )
            await asyncio.sleep(KILL_EVERY)
    finally:
        await admin.close()
    return killed


async def _write(store: HistoryStore, written: dict[str, list[str]], failures: list[str]) -> None:
    deadline = time.monotonic() + SECONDS
    n = 0
    while time.monotonic() < deadline:
        session = SESSIONS[n % len(SESSIONS)]
        turn = _turn(n)
        try:
            await store.append(session, turn)
        except ChatledgerError as error:  # the kill reached the call: said in our words
            failures.append(f"append: {type(error).__name__}: {error}")
            await _until_stored(store, session, turn)
        written[session].extend(m.message_id for m in turn)
        if n % 4 == 3:
            try:
                await store.compact(session, "sliding-window:keep_last_turns=2")
            except ChatledgerError as error:
                failures.append(f"compact: {type(error).__name__}: {error}")
        n += 1


async def _until_stored(store: HistoryStore, session: str, turn: list[Message]) -> None:
    """Repeat a failed append (the same ids) until it goes through."""
    for _ in range(50):
        try:
            await store.append(session, turn)
            return
        except ChatledgerError:
            await asyncio.sleep(0.05)
    raise AssertionError("an append never went through between the kills")


@pytest.mark.parametrize(
    "through",
    ["server", pytest.param("pgbouncer", marks=pytest.mark.pgbouncer)],
)
async def test_appends_and_compactions_while_the_server_kills_the_connections(
    pg_server: PgServer, through: str, request: pytest.FixtureRequest
) -> None:
    """Directly, and through PgBouncer in transaction mode (whose server connections
    are the ones killed)."""
    name = pg_server.clone()
    try:
        url = pg_server.url_for(name)
        if through == "pgbouncer":
            url = request.getfixturevalue("pg_bouncer").url_for(name)
        tokenizer = CharacterEstimatorTokenizer()
        written: dict[str, list[str]] = {s: [] for s in SESSIONS}
        failures: list[str] = []
        async with HistoryStore.open(url, tokenizer=tokenizer, timeout=10) as store:
            stop = asyncio.Event()
            admin = _asyncpg_dsn(pg_server.url_for(name))  # on the server itself
            killer = asyncio.create_task(_kill_backends(admin, name, stop))
            try:
                await asyncio.wait_for(_write(store, written, failures), 120)
            finally:
                stop.set()
                killed = await killer
            assert killed > 0
            await store.append("after", _turn(0))  # the store works again
        async with HistoryStore.open(url, tokenizer=tokenizer) as fresh:
            for session, expected in written.items():
                stored = [
                    m.message_id
                    for m in await fresh.history(session, include_excluded=True)
                    if m.kind != "summary"
                ]
                assert stored == expected, session
            report = await fresh.doctor()
            assert report.healthy, report.findings
        print(f"\n{killed} connections killed, {len(failures)} calls failed: {failures[:3]}")
    finally:
        pg_server.drop_later(name)
