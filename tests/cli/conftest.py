"""Fixtures of the CLI tests: a private SQLite file per test, seeded through the API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import HistoryStore
from store.sql.migrations import migrate
from tests.cli.helpers import CLEARED_ENV, conversation, run_api

requires_compaction = pytest.mark.skipif(
    not all(hasattr(HistoryStore, name) for name in ("context", "compact", "audit", "stats")),
    reason="waiting for issue #5 on the SQL store (context, compact, audit, stats)",
)
"""For tests that need the SQL store's projection, compaction and audit."""


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A migrated, empty SQLite database file, private to the test."""
    value = f"sqlite:///{tmp_path}/cli.db"
    asyncio.run(migrate(value))
    return value


@pytest.fixture
def seeded(url: str) -> str:
    """``url`` with sessions ``alpha`` (3 tool turns) and ``beta`` (1 turn), tenant default,
    and ``gamma`` (1 turn) of tenant ``other``."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(3))
        await store.append("beta", conversation(1))

    async def fill_other(store: HistoryStore) -> None:
        await store.append("gamma", conversation(1))

    run_api(url, fill)
    run_api(url, fill_other, tenant="other")
    return url


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An environment of a colour terminal 120 columns wide."""
    for name in (*CLEARED_ENV, "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("TERM", "xterm-256color")
    yield
