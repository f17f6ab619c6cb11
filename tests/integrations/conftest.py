"""Fixtures for the Agent Framework integration tests: tokenizer and stores.

``any_store`` is one store per backend: the in-memory store, a SQLite file in
``tmp_path`` and a PostgreSQL database cloned from the migrated template of
``tests/conftest.py`` (``postgres`` marker; skipped when the server is unreachable).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("agent_framework")

from store import HistoryStore
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import TiktokenTokenizer, Tokenizer
from tests.conftest import PgServer

AnyStore = InMemoryHistoryStore | HistoryStore
STORE_BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


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
