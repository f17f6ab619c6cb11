"""Shared fixtures: one database URL fixture parametrized over the backends.

* ``sqlite``: a database file in ``tmp_path``.
* ``postgres``: the server at ``$CHATLEDGER_TEST_PG_URL`` (default
  ``postgresql://postgres@127.0.0.1:5432/test``). A template database is migrated once
  per run and cloned (``CREATE DATABASE ... TEMPLATE``) for each test, then dropped.
  When the server is unreachable the PostgreSQL tests are skipped, unless
  ``CHATLEDGER_REQUIRE_PG=1``, which turns that into a failure.
* ``pgbouncer``: the same server through a PgBouncer in transaction mode started for the
  run (``tests/pgbouncer.py``), reached by a plain URL: the conformance suite and the
  concurrency tests (:data:`POOLED_BACKENDS`) run on it too. Databases are created and
  dropped on the server directly.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.engine import make_url

from store import HistoryStore
from store.sql.migrations import migrate
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests import pgbouncer

T = TypeVar("T")

PG_URL_ENV = "CHATLEDGER_TEST_PG_URL"
PG_DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
POOLED_BACKENDS = [
    *BACKENDS,
    pytest.param("pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]),
]
"""The SQL backends and PostgreSQL through PgBouncer in transaction mode (the
concurrency tests run on these)."""
ALL_BACKENDS = ["memory", *POOLED_BACKENDS]
"""The SQL backends, PostgreSQL through PgBouncer and the in-memory store
(``tests/conformance/`` runs on all four)."""
_counter = itertools.count()


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion in a fresh loop on a helper thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


def _asyncpg_dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database is not None:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def _unique_name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_counter)}"


_PENDING_DROPS = 4
"""Test databases a test process may leave to be dropped in the background."""


@dataclass
class PgServer:
    """The test PostgreSQL server and its migrated template database.

    Creating and dropping a database each take the better part of a second, so clones
    are made one ahead and dropped in the background; :meth:`close` waits for both.
    """

    url: str
    template: str
    _creator: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))
    _dropper: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(2))
    _next: Future[str] | None = None
    _drops: list[Future[None]] = field(default_factory=list)

    def _new_clone(self) -> str:
        name = _unique_name("chatledger_t")
        self.create(name, template=self.template)
        return name

    def clone(self) -> str:
        """The name of a fresh copy of the template (the next one is made meanwhile)."""
        future = self._next or self._creator.submit(self._new_clone)
        name = future.result()
        self._next = self._creator.submit(self._new_clone)
        return name

    def drop_later(self, name: str) -> None:
        """Drop database ``name`` in the background, waiting while more than
        :data:`_PENDING_DROPS` drops are still to run: until its drop a database stays,
        and a pooler's idle connections to it with it (on PostgreSQL 15 each ``DROP DATABASE``
        forces a checkpoint, slower than the clones two test processes make: unbounded,
        the queue ran the server out of connections)."""
        self._drops.append(self._dropper.submit(self.drop, name))
        pending = [future for future in self._drops if not future.done()]
        for future in pending[: max(0, len(pending) - _PENDING_DROPS)]:
            future.result()

    def close(self) -> None:
        """Drop the spare clone, wait for every drop, then drop the template."""
        if self._next is not None:
            self.drop(self._next.result())
        self._creator.shutdown()
        for future in self._drops:
            future.result()
        self._dropper.shutdown()
        self.drop(self.template)

    def url_for(self, database: str) -> str:
        """A ``postgresql://`` URL for ``database`` on this server."""
        return _asyncpg_dsn(self.url, database)

    async def _admin(self, *statements: str) -> None:
        conn = await asyncpg.connect(_asyncpg_dsn(self.url), timeout=10)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    def create(self, name: str, *, template: str | None = None) -> str:
        """Create database ``name`` (cloned from ``template`` when given); return its URL."""
        clause = f' TEMPLATE "{template}"' if template else ""
        run_sync(lambda: self._admin(f'CREATE DATABASE "{name}"{clause}'))
        return self.url_for(name)

    def drop(self, name: str) -> None:
        """Drop database ``name``, terminating its connections first."""
        run_sync(
            lambda: self._admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
                f'DROP DATABASE IF EXISTS "{name}"',
            )
        )


def _unreachable(reason: str) -> None:
    if os.environ.get("CHATLEDGER_REQUIRE_PG") == "1":
        pytest.fail(f"PostgreSQL is required (CHATLEDGER_REQUIRE_PG=1) but {reason}")
    pytest.skip(f"PostgreSQL unavailable: {reason}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The PostgreSQL server, with a template database migrated once for the run."""
    url = os.environ.get(PG_URL_ENV, PG_DEFAULT_URL)
    server = PgServer(url=url, template=f"chatledger_tpl_{os.getpid()}")
    try:
        server.drop(server.template)
        server.create(server.template)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        _unreachable(f"cannot reach {url}: {error}")
    try:
        run_sync(lambda: migrate(server.url_for(server.template)))
        yield server
    finally:
        server.close()


def _bouncer(pg_server: PgServer, mode: str) -> Iterator[pgbouncer.Pgbouncer]:
    started = pgbouncer.start(pg_server.url, mode)
    try:
        yield started
    finally:
        started.close()


@pytest.fixture(scope="session")
def pg_bouncer(pg_server: PgServer) -> Iterator[pgbouncer.Pgbouncer]:
    """A PgBouncer in transaction mode in front of the test server, for the run."""
    yield from _bouncer(pg_server, "transaction")


@pytest.fixture(scope="session")
def pg_bouncer_session(pg_server: PgServer) -> Iterator[pgbouncer.Pgbouncer]:
    """A PgBouncer in session mode in front of the test server, for the run."""
    yield from _bouncer(pg_server, "session")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test: ``sqlite`` or ``postgres`` (or ``pgbouncer`` where a
    module asks for :data:`POOLED_BACKENDS`)."""
    return str(request.param)


def _url_of(backend: str, request: pytest.FixtureRequest, server: PgServer, name: str) -> str:
    if backend == "pgbouncer":
        bouncer: pgbouncer.Pgbouncer = request.getfixturevalue("pg_bouncer")
        return bouncer.url_for(name)
    return server.url_for(name)


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A migrated, empty database of the backend under test, private to the test."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/chatledger.db"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.clone()
    try:
        yield _url_of(backend, request, server, name)
    finally:
        server.drop_later(name)


@pytest.fixture
def empty_db_url(backend: str, request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """An empty database (no schema) of the backend under test."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/empty.db"
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = _unique_name("chatledger_e")
    server.create(name)
    try:
        yield _url_of(backend, request, server, name)
    finally:
        server.drop_later(name)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[HistoryStore]:
    """A store on ``db_url`` for the default tenant, counting with the character estimator."""
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as opened:
        yield opened
