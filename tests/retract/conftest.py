"""Fixtures of the retraction tests: one store of each backend (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from store import HistoryStore, InMemoryHistoryStore
from store.contract import HistoryBackend
from strategies.tokenizers import CharacterEstimatorTokenizer

STORES = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
async def any_store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[HistoryBackend]:
    """A store of each backend, counting with the character estimator."""
    tokenizer = CharacterEstimatorTokenizer()
    if request.param == "memory":
        yield InMemoryHistoryStore(tokenizer=tokenizer)
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/retract.db"
    else:
        server = request.getfixturevalue("pg_server")
        name = server.clone()
        request.addfinalizer(lambda: server.drop_later(name))
        url = server.url_for(name)
    async with HistoryStore.open(url, tokenizer=tokenizer) as store:
        yield store
