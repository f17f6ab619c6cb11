"""The conformance suite's fixtures: every test here runs on each backend of the contract.

``store`` is a :class:`~store.contract.HistoryBackend` of the backend under test: the
in-memory store, SQLite (a file in ``tmp_path``) or PostgreSQL (a throwaway clone of the
migrated template, see ``tests/conftest.py``), counting with the character estimator.
A test that needs a second store on the same data (another tenant, another tokenizer)
asks ``stores`` for one. Tests here use the contract only: what needs SQL rows or an
engine belongs in ``tests/store/``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from store import HistoryStore
from store.contract import DEFAULT_TENANT, HistoryBackend
from store.encryption import KeyRing
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import Tokenizer
from tests.conformance.toy_strategies import TOKENIZER
from tests.conftest import ALL_BACKENDS, PgServer
from tests.sealing import keyring_for_tests


@dataclass
class Stores:
    """Opens stores of one backend on one shared database; closes them at the end."""

    backend: str
    """``memory``, ``sqlite``, ``postgres``, ``pgbouncer``, or a SQL one ``-sealed``."""
    url: str | None = None
    """The database URL of a SQL backend."""
    encryption: KeyRing | None = None
    """The key ring of a ``-sealed`` backend (every store opened with it)."""
    database: MemoryDatabase = field(default_factory=MemoryDatabase)
    """The records of the in-memory backend."""
    _opened: list[HistoryBackend] = field(default_factory=list)

    async def open(
        self, *, tenant: str = DEFAULT_TENANT, tokenizer: Tokenizer = TOKENIZER
    ) -> HistoryBackend:
        """A store for ``tenant`` counting with ``tokenizer``, on the shared database."""
        opened: HistoryBackend
        if self.url is None:
            opened = InMemoryHistoryStore(self.database, tenant=tenant, tokenizer=tokenizer)
        else:
            opened = await HistoryStore.open(
                self.url, tenant=tenant, tokenizer=tokenizer, encryption=self.encryption
            )
        self._opened.append(opened)
        return opened

    async def aclose(self) -> None:
        """Close every store opened here."""
        for opened in self._opened:
            await opened.aclose()


SEALED_BACKENDS = [
    "sqlite-sealed",
    pytest.param("postgres-sealed", marks=pytest.mark.postgres),
]
"""The SQL backends with encryption at rest: every store opened with a key ring."""


@pytest.fixture(params=[*ALL_BACKENDS, *SEALED_BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (overrides the SQL-only fixture of ``tests/conftest.py``)."""
    return str(request.param)


@pytest.fixture
async def stores(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    """Stores of the backend under test, all on one database private to the test."""
    server: PgServer | None = None
    if backend == "sqlite-sealed":
        tmp_path = request.getfixturevalue("tmp_path")
        opened = Stores(backend, f"sqlite:///{tmp_path}/chatledger.db", keyring_for_tests())
    elif backend == "postgres-sealed":  # a database of its own, as db_url makes one
        server = request.getfixturevalue("pg_server")
        name = server.clone()
        opened = Stores(backend, server.url_for(name), keyring_for_tests())
    else:
        url = None if backend == "memory" else str(request.getfixturevalue("db_url"))
        opened = Stores(backend, url)
    try:
        yield opened
    finally:
        await opened.aclose()
        if server is not None:
            server.drop_later(name)


@pytest.fixture
async def store(stores: Stores) -> HistoryBackend:
    """A store of the backend under test for the default tenant."""
    return await stores.open()
