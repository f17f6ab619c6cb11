"""Fixtures of the recall tests: the store searched (one a backend)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from store import HistoryStore
from store.contract import HistoryBackend
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import TiktokenTokenizer, Tokenizer

RECALL_BACKENDS = ["memory", "sqlite"]
"""The backends the recall tool is tested on ("sqlite" joins once it searches)."""


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return TiktokenTokenizer("o200k_base")


@pytest.fixture
def database() -> MemoryDatabase:
    return MemoryDatabase()


@pytest.fixture(params=RECALL_BACKENDS)
def recall_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@asynccontextmanager
async def _opened(
    backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer, tenant: str
) -> AsyncIterator[HistoryBackend]:
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
    """A store of each backend that searches, private to the test."""
    async with _opened(recall_backend, database, tmp_path, tokenizer, "default") as store:
        yield store


@pytest.fixture
async def other_tenant_store(
    recall_backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    """The database of :func:`recall_store`, seen by the tenant ``other``."""
    async with _opened(recall_backend, database, tmp_path, tokenizer, "other") as store:
        yield store


@pytest.fixture
async def second_store(
    recall_backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    """Another store object on the database of :func:`recall_store`, same tenant (as
    another process opens it)."""
    async with _opened(recall_backend, database, tmp_path, tokenizer, "default") as store:
        yield store
