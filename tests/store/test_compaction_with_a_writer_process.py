"""Compaction on write while a writer process appends to the same SQL session.

The load and the checks of ``tests/conformance/test_compaction_under_writers.py``, with
one more writer: a process with its own engine on the same database.
"""

from __future__ import annotations

import asyncio
import multiprocessing

import pytest

from store import HistoryStore
from tests.conformance.test_compaction_under_writers import (
    PROCESS_WRITER,
    ROUNDS,
    SESSION,
    TASK_WRITERS,
    check,
    exercise,
)
from tests.conftest import POOLED_BACKENDS
from tests.store.writer import run


@pytest.fixture(params=POOLED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite, PostgreSQL, and PostgreSQL through PgBouncer in transaction mode."""
    return str(request.param)


async def test_sql_store_compacts_while_a_process_appends(store: HistoryStore, db_url: str) -> None:
    """A writer process appends to the session too, through its own engine."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.store.writer"])
    proc = context.Process(target=run, args=(db_url, SESSION, PROCESS_WRITER, ROUNDS))

    async def settle() -> None:
        await asyncio.to_thread(proc.join, 120)
        assert proc.exitcode == 0

    proc.start()
    try:
        applied = await exercise(store, settle)
    finally:
        await asyncio.to_thread(proc.join, 120)
    await check(store, applied, ["seed", PROCESS_WRITER, *TASK_WRITERS, "tail"])
