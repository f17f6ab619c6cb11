"""Fixtures for the Agent Framework integration tests: tokenizer and stores.

``any_store`` is one store per backend: the in-memory store, a SQLite file in
``tmp_path`` and a PostgreSQL database cloned from the migrated template of
``tests/conftest.py`` (``postgres`` marker; skipped when the server is unreachable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

pytest.importorskip("agent_framework")

from store import HistoryStore
from store.contract import HistoryBackend
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import TiktokenTokenizer, Tokenizer
from tests.conftest import PgServer

AnyStore = InMemoryHistoryStore | HistoryStore
STORE_BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
RECALL_BACKENDS = ["memory", "sqlite"]
"""The backends the recall tool runs on end to end."""


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return TiktokenTokenizer("o200k_base")


@pytest.fixture
def database() -> MemoryDatabase:
    return MemoryDatabase()


@pytest.fixture
def memory_store(database: MemoryDatabase, tokenizer: Tokenizer) -> InMemoryHistoryStore:
    return InMemoryHistoryStore(database, tokenizer=tokenizer)


@pytest.fixture(params=STORE_BACKENDS)
async def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[AnyStore]:
    """A store of each backend, private to the test, counting with tiktoken."""
    if request.param == "memory":
        yield InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
        return
    if request.param == "sqlite":
        async with HistoryStore.open(f"sqlite:///{tmp_path / 'e2e.db'}", tokenizer=tokenizer) as s:
            yield s
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.clone()
    try:
        async with HistoryStore.open(server.url_for(name), tokenizer=tokenizer) as opened:
            yield opened
    finally:
        server.drop_later(name)


@pytest.fixture(params=RECALL_BACKENDS)
def recall_backend(request: pytest.FixtureRequest) -> str:
    """The backend of :func:`recall_store` and :func:`other_tenant_store`."""
    return str(request.param)


@asynccontextmanager
async def open_recall_store(
    backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer, tenant: str
) -> AsyncIterator[HistoryBackend]:
    """A store of ``backend`` for ``tenant``: every tenant of a test shares one database."""
    if backend == "memory":
        yield InMemoryHistoryStore(database, tenant=tenant, tokenizer=tokenizer)
        return
    assert backend == "sqlite", backend
    url = f"sqlite:///{tmp_path / 'recall.db'}"
    async with HistoryStore.open(url, tenant=tenant, tokenizer=tokenizer) as store:
        yield store


@pytest.fixture
async def recall_store(
    recall_backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    """A store that searches, of each backend, private to the test."""
    async with open_recall_store(recall_backend, database, tmp_path, tokenizer, "default") as s:
        yield s


@pytest.fixture
async def other_tenant_store(
    recall_backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    """The database of :func:`recall_store`, seen by the tenant ``other``."""
    async with open_recall_store(recall_backend, database, tmp_path, tokenizer, "other") as s:
        yield s
