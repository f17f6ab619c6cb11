"""Fixtures of the audit tests: one store of each backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store import HistoryStore
from store.contract import HistoryBackend
from store.memory import InMemoryHistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import PgServer

TOKENIZER = CharacterEstimatorTokenizer()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def any_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[HistoryBackend]:
    """A fresh store of each backend, counting with the character estimator."""
    if request.param == "memory":
        yield InMemoryHistoryStore(tokenizer=TOKENIZER)
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit.db"
        async with HistoryStore.open(url, tokenizer=TOKENIZER) as store:
            yield store
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = server.clone()
    try:
        async with HistoryStore.open(server.url_for(name), tokenizer=TOKENIZER) as store:
            yield store
    finally:
        server.drop_later(name)
