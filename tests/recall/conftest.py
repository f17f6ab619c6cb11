"""Fixtures of the recall tests: the store searched (one a backend)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from store.contract import HistoryBackend
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import TiktokenTokenizer, Tokenizer

RECALL_BACKENDS = ["memory"]
"""The backends the recall tool is tested on (the SQL ones join once they search)."""


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return TiktokenTokenizer("o200k_base")


@pytest.fixture
def database() -> MemoryDatabase:
    return MemoryDatabase()


@pytest.fixture(params=RECALL_BACKENDS)
async def recall_store(
    request: pytest.FixtureRequest, database: MemoryDatabase, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    """A store of each backend that searches, private to the test."""
    assert request.param == "memory"
    yield InMemoryHistoryStore(database, tokenizer=tokenizer)
