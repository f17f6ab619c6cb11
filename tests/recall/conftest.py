"""Fixtures of the recall tests: the stores of ``tests/integrations`` (one a backend
that searches, another tenant of its database), and a second store object on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from store.contract import HistoryBackend
from store.memory import MemoryDatabase
from strategies.tokenizers import Tokenizer
from tests.integrations.conftest import (
    database,
    open_recall_store,
    other_tenant_store,
    recall_backend,
    recall_store,
    tokenizer,
)

__all__ = [
    "database",
    "other_tenant_store",
    "recall_backend",
    "recall_store",
    "second_store",
    "tokenizer",
]


@pytest.fixture
async def second_store(
    recall_backend: str, database: MemoryDatabase, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[HistoryBackend]:
    """Another store object on the database of :func:`recall_store`, same tenant (as
    another process opens it)."""
    async with open_recall_store(recall_backend, database, tmp_path, tokenizer, "default") as s:
        yield s
