"""Fixtures of the in-memory store's tests."""

from __future__ import annotations

import pytest

from store.memory import InMemoryHistoryStore
from tests.conformance.toy_strategies import TOKENIZER


@pytest.fixture
def store() -> InMemoryHistoryStore:
    """A fresh store for the default tenant, counting with the character estimator."""
    return InMemoryHistoryStore(tokenizer=TOKENIZER)
