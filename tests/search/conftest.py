"""Fixtures of the search tests: the two engines the compiled queries run on.

* ``fts5``: a function that makes an in-memory SQLite connection with an FTS5 table of
  normalized documents (skipped when the SQLite library has no FTS5).
* ``pg``: a connection to the test PostgreSQL server (``$CHATLEDGER_TEST_PG_URL``, see
  ``tests/conftest.py``); only ``to_tsvector``/``to_tsquery`` run, no table is made.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from store.search import normalize
from tests.conftest import PG_DEFAULT_URL, PG_URL_ENV, _asyncpg_dsn, _unreachable

Fts5 = Callable[[Sequence[str]], sqlite3.Connection]


def _has_fts5() -> bool:
    with sqlite3.connect(":memory:") as db:
        try:
            db.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
        except sqlite3.OperationalError:
            return False
    return True


@pytest.fixture(scope="session")
def fts5() -> Fts5:
    """Make a connection whose table ``docs`` indexes the given texts, normalized
    (``rowid`` is the text's index)."""
    if not _has_fts5():
        pytest.skip(f"this SQLite library ({sqlite3.sqlite_version}) has no FTS5")

    def make(texts: Sequence[str]) -> sqlite3.Connection:
        db = sqlite3.connect(":memory:")
        db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='unicode61 remove_diacritics 0')"
        )
        db.executemany(
            "INSERT INTO docs(rowid, body) VALUES (?, ?)",
            [(index, normalize(text)) for index, text in enumerate(texts)],
        )
        return db

    return make


class Pg:
    """A PostgreSQL connection driven from synchronous tests, on its own event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, conn: Any) -> None:
        self._loop = loop
        self._conn = conn

    def fetch(self, sql: str, *args: object) -> list[Any]:
        """The rows of ``sql``."""
        return list(self._loop.run_until_complete(self._conn.fetch(sql, *args)))

    def fetchval(self, sql: str, *args: object) -> Any:
        """The first value of ``sql``."""
        return self._loop.run_until_complete(self._conn.fetchval(sql, *args))


@pytest.fixture(scope="session")
def pg() -> Iterator[Pg]:
    """The test PostgreSQL server (skipped when unreachable, see ``tests/conftest.py``)."""
    url = os.environ.get(PG_URL_ENV, PG_DEFAULT_URL)
    loop = asyncio.new_event_loop()
    try:
        conn = loop.run_until_complete(asyncpg.connect(_asyncpg_dsn(url), timeout=10))
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        loop.close()
        _unreachable(f"cannot reach {url}: {error}")
    try:
        yield Pg(loop, conn)
    finally:
        loop.run_until_complete(conn.close())
        loop.close()
