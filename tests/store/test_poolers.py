"""PostgreSQL behind PgBouncer (Debian's 1.18, default settings): the URL option
``pooler``, the refusal of the startup parameters that tells a pooler without it, and
what each mode keeps of a connection's settings and prepared statements.

The conformance suite and the concurrency tests run through PgBouncer in transaction
mode as a backend of their own (``pgbouncer``, see ``tests/conftest.py``); here are the
settings themselves, session mode, and migrations through the pooler.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from store import HistoryStore
from store.errors import InvalidInput
from store.sql.append.one_statement import append_in_one_statement
from store.sql.drivers.engine import create_engine, read_connection, write_connection
from store.sql.drivers.poolers import Pooling, pooling_of
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.cli.helpers import assert_one_line_error, invoke
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import ExcludeOldest
from tests.conftest import PgServer, _asyncpg_dsn, _unique_name
from tests.pgbouncer import Pgbouncer

TIMEOUT = 1.5
"""The store's lock timeout in these tests: ``lock_timeout`` 1500 ms."""
SHOWN_TIMEOUT = "1500ms"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h/db?pooler=statement",
        "postgresql://u@h/db?pooler=TRANSACTION",
        "postgresql://u@h/db?pooler=session&pooler=transaction",
        "sqlite:///chatledger.db?pooler=transaction",
    ],
)
def test_the_pooler_option_is_refused_in_one_line_unless_session_or_transaction(url: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        create_engine(url)
    assert "pooler" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_cli_refuses_a_bad_pooler_option_in_one_line() -> None:
    result = invoke("db", "upgrade", "--url", "postgresql://u@127.0.0.1:1/db?pooler=statement")
    assert_one_line_error(result, contains="pooler=transaction")


@pytest.mark.parametrize("mode", [Pooling.SESSION, Pooling.TRANSACTION])
async def test_the_pooler_option_chooses_the_mode_and_leaves_the_url(mode: Pooling) -> None:
    engine = create_engine(f"postgresql://u@h/db?pooler={mode.value}&ssl=disable")
    try:
        assert pooling_of(engine.dialect) is mode
        assert dict(engine.url.query) == {"ssl": "disable"}  # asyncpg gets the rest
    finally:
        await engine.dispose()


async def test_a_url_without_the_option_is_direct_once_the_server_accepts_it(
    pg_server: PgServer,
) -> None:
    engine = create_engine(pg_server.url_for(pg_server.template))
    try:
        assert pooling_of(engine.dialect) is None  # nothing known before connecting
        async with read_connection(engine) as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
        assert pooling_of(engine.dialect) is Pooling.DIRECT
    finally:
        await engine.dispose()


@pytest.fixture
def database(pg_server: PgServer) -> Iterator[str]:
    """A migrated database of the test server, private to the test (its name)."""
    name = pg_server.clone()
    try:
        yield name
    finally:
        pg_server.drop_later(name)


async def _settings(conn: AsyncConnection) -> tuple[str, str]:
    timeout = (await conn.execute(text("SHOW lock_timeout"))).scalar_one()
    path = (await conn.execute(text("SHOW search_path"))).scalar_one()
    return str(timeout), str(path)


async def _transactions(conn: AsyncConnection) -> int:
    """How many server transactions two statements of ``conn`` ran in."""
    probe = text("SELECT pg_current_xact_id()::text")
    first = (await conn.execute(probe)).scalar()
    second = (await conn.execute(probe)).scalar()
    return len({first, second})


async def _named_statements(conn: AsyncConnection) -> int:
    """How many named prepared statements the server session of ``conn`` holds, after
    a statement the store prepares (one it has seen before) ran twice on it."""
    probe = select(text("1"))
    for _ in range(3):
        await conn.execute(probe)
    found = await conn.execute(text("SELECT count(*) FROM pg_prepared_statements"))
    return int(found.scalar_one())


@pytest.fixture
async def engine_through(
    request: pytest.FixtureRequest, database: str
) -> AsyncIterator[tuple[AsyncEngine, Pgbouncer]]:
    """An engine on ``database`` through the PgBouncer (and URL option) the test names,
    and that PgBouncer."""
    fixture, option = request.param
    bouncer: Pgbouncer = request.getfixturevalue(fixture)
    engine = create_engine(
        bouncer.url_for(database, option=option), schema="public", timeout=TIMEOUT
    )
    try:
        yield engine, bouncer
    finally:
        await engine.dispose()


@pytest.mark.postgres
@pytest.mark.pgbouncer
@pytest.mark.parametrize(
    "engine_through",
    [("pg_bouncer", None), ("pg_bouncer", "transaction"), ("pg_bouncer_session", None)],
    indirect=True,
    ids=["transaction-pooler-found", "transaction-pooler-said", "session-pooler-found"],
)
async def test_behind_a_transaction_pooler_every_transaction_has_the_settings_and_keeps_nothing(
    engine_through: tuple[AsyncEngine, Pgbouncer], database: str
) -> None:
    """A pooler that refuses the startup parameters is taken for a transaction pooler
    (safe behind a session pooler too): the settings come with each transaction, reads
    included, for that transaction only, and no statement stays prepared."""
    engine, bouncer = engine_through
    async with write_connection(engine) as conn:
        assert await _settings(conn) == (SHOWN_TIMEOUT, "public")
        assert await _named_statements(conn) == 0
    assert pooling_of(engine.dialect) is Pooling.TRANSACTION
    async with read_connection(engine) as conn:
        assert await _settings(conn) == (SHOWN_TIMEOUT, "public")
        assert await _transactions(conn) == 1  # a read is one transaction
    # the server connections the pooler hands out again have the server's defaults
    raw = await asyncpg.connect(bouncer.url_for(database), statement_cache_size=0)
    try:
        for _ in range(5):
            assert await raw.fetchval("SHOW lock_timeout") == "0"
    finally:
        await raw.close()


@pytest.mark.postgres
@pytest.mark.pgbouncer
@pytest.mark.parametrize(
    "engine_through", [("pg_bouncer_session", "session")], indirect=True, ids=["said"]
)
async def test_behind_a_session_pooler_the_connection_keeps_its_settings_and_statements(
    engine_through: tuple[AsyncEngine, Pgbouncer],
) -> None:
    """Said, a session pooler's connection is the server session: the settings are made
    once, and reads in autocommit and prepared statements are kept, as directly."""
    engine, _ = engine_through
    async with read_connection(engine) as conn:
        assert await _settings(conn) == (SHOWN_TIMEOUT, "public")
        assert await _transactions(conn) == 2  # autocommit: each statement its own
    assert pooling_of(engine.dialect) is Pooling.SESSION
    async with write_connection(engine) as conn:
        assert await _named_statements(conn) >= 1


@pytest.mark.postgres
async def test_directly_statements_stay_prepared(pg_server: PgServer, database: str) -> None:
    """What the pooler tests count would be seen directly (the count can tell)."""
    engine = create_engine(pg_server.url_for(database), timeout=TIMEOUT)
    try:
        async with write_connection(engine) as conn:
            assert await _settings(conn) == (SHOWN_TIMEOUT, '"$user", public')
            assert await _named_statements(conn) >= 1
    finally:
        await engine.dispose()


@pytest.mark.postgres
@pytest.mark.pgbouncer
async def test_a_store_with_a_schema_works_behind_a_transaction_pooler(
    pg_server: PgServer, pg_bouncer: Pgbouncer
) -> None:
    """The schema's ``search_path`` reaches every transaction: the store's tables are
    created in it and found there, reads included; ``VACUUM`` runs there too."""
    name = _unique_name("chatledger_s")
    pg_server.create(name)
    try:
        url = pg_bouncer.url_for(name)
        tokenizer = CharacterEstimatorTokenizer()
        async with HistoryStore.open(url, schema="tenant_one", tokenizer=tokenizer) as one:
            await one.append("s", [Message.text_message("user", "hi")])
            assert [m.message.text for m in await one.history("s")] == ["hi"]
            await one.vacuum()  # outside a transaction, through the pooler too
        raw = await asyncpg.connect(_asyncpg_dsn(pg_server.url, name))
        try:
            found = await raw.fetch(
                "SELECT table_schema FROM information_schema.tables "
                "WHERE table_name = 'chatledger_messages'"
            )
            assert [row[0] for row in found] == ["tenant_one"]
        finally:
            await raw.close()
    finally:
        pg_server.drop_later(name)


@pytest.mark.postgres
@pytest.mark.pgbouncer
@pytest.mark.parametrize("option", [None, "transaction"])
def test_db_upgrade_runs_through_a_transaction_pooler(
    pg_server: PgServer, pg_bouncer: Pgbouncer, option: str | None
) -> None:
    """``chatledger db upgrade`` creates the schema through the pooler, then finds it
    current, and a store opens on it."""
    name = _unique_name("chatledger_m")
    pg_server.create(name)
    try:
        url = pg_bouncer.url_for(name, option=option)
        created = invoke("db", "upgrade", "--url", url)
        assert created.returncode == 0, created.stderr
        checked = invoke("db", "check", "--url", url)
        assert checked.returncode == 0, checked.stderr

        async def one_turn() -> list[str]:
            tokenizer = CharacterEstimatorTokenizer()
            async with HistoryStore.open(url, create=False, tokenizer=tokenizer) as store:
                await store.append("s", [Message.text_message("user", "hi")])
                return [m.message.text for m in await store.history("s")]

        assert asyncio.run(one_turn()) == ["hi"]
    finally:
        pg_server.drop_later(name)


@pytest.mark.postgres
@pytest.mark.pgbouncer
@pytest.mark.parametrize("through", ["directly", "session-pooler"])
async def test_appends_in_one_statement_and_a_compaction_in_a_schema(
    pg_server: PgServer,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    through: str,
) -> None:
    """Directly and behind a session pooler, appends after the first go in one statement
    (autocommit keeps the connection's settings there), and its statements and the
    compaction's find their tables in the store's schema (the ``search_path``)."""
    name = _unique_name("chatledger_s")
    pg_server.create(name)
    try:
        if through == "directly":
            url = pg_server.url_for(name)
        else:
            bouncer: Pgbouncer = request.getfixturevalue("pg_bouncer_session")
            url = bouncer.url_for(name, option="session")
        written: list[bool] = []

        async def counted(*args: Any, **kwargs: Any) -> Any:
            result = await append_in_one_statement(*args, **kwargs)
            written.append(result is not None)
            return result

        monkeypatch.setattr("store.sql.store.append_in_one_statement", counted)
        tokenizer = CharacterEstimatorTokenizer()
        async with HistoryStore.open(url, schema="tenant_one", tokenizer=tokenizer) as one:
            for n in range(3):
                await one.append("s", _chat(f"p{n}"))
            event = await one.compact("s", ExcludeOldest(2), phase="after_run")
            assert event is not None and len(event.excluded) == 2
            stored = await one.history("s", include_excluded=True)
            assert [m.message_id for m in stored] == [
                m.message_id for n in range(3) for m in _chat(f"p{n}")
            ]
            assert (await one.doctor("s")).findings == ()
        assert written.count(True) == 2, written  # the first append creates the session
    finally:
        pg_server.drop_later(name)
