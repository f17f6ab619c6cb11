"""The physical limit: plain ``sqlite3`` and tiktoken, with no framework around them.

Bulk import is one ``executemany`` per batch inside one transaction, plus tiktoken
(``o200k_base``) counting of what the model reads of each message; the two costs are
reported separately too. The request context is read newest first with an index and
stops at the input budget, the least work any store can do.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from benchmarks.generator import ChatDict, model_text
from benchmarks.peers import CONTEXT_WINDOW, MAX_OUTPUT_TOKENS, SESSION_ID, System
from benchmarks.tokenizing import TokenCounter, load_tiktoken

__all__ = ["LimitSystem"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    model_text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""
_INSERT = "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)"
Row = tuple[str, int, str, str, str, str]


class LimitSystem(System):
    """Rows in one indexed table; tokens counted once on write."""

    _db: sqlite3.Connection
    _counter: TokenCounter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._seq = 0
        self._sqlite_s = 0.0
        self._tiktoken_s = 0.0
        self._in_transaction = False

    async def open(self, *, create: bool) -> None:
        """Connect (autocommit off is managed by hand) and find the next ``seq``."""
        self._counter = self.tokenizer or load_tiktoken()
        self._db = sqlite3.connect(self.target.location, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        if create:
            self._db.execute(_SCHEMA)
        row = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM messages").fetchone()
        self._seq = int(row[0])

    def prepare(self, items: list[ChatDict]) -> list[Row]:
        """Rows without token counts: (session, seq, id, role, body, model text)."""
        rows: list[Row] = []
        for item in items:
            self._seq += 1
            body = json.dumps(item, separators=(",", ":"))
            rows.append((SESSION_ID, self._seq, item["id"], item["role"], body, model_text(item)))
        return rows

    def _count(self, rows: list[Row]) -> list[tuple[Any, ...]]:
        start = time.perf_counter()
        counted = [(*row, self._counter.count_tokens(row[5])) for row in rows]
        self._tiktoken_s += time.perf_counter() - start
        return counted

    async def load(self, native: list[Row]) -> None:
        """Count tokens, then ``executemany`` into the one open transaction."""
        counted = self._count(native)
        start = time.perf_counter()
        if not self._in_transaction:
            self._db.execute("BEGIN")
            self._in_transaction = True
        self._db.executemany(_INSERT, counted)
        self._sqlite_s += time.perf_counter() - start

    async def finish_load(self) -> dict[str, float]:
        """Commit the import transaction."""
        self._commit()
        return {}

    def _commit(self) -> None:
        if self._in_transaction:
            start = time.perf_counter()
            self._db.execute("COMMIT")
            self._sqlite_s += time.perf_counter() - start
            self._in_transaction = False

    async def append_turn(self, native: list[Row]) -> None:
        """Insert the turn in its own transaction."""
        counted = self._count(native)
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(_INSERT, counted)

    async def context(self) -> int:
        """Newest rows first until the input budget is full, then put in order."""
        budget = CONTEXT_WINDOW - MAX_OUTPUT_TOKENS
        cursor = self._db.execute(
            "SELECT body, tokens FROM messages WHERE session_id = ? ORDER BY seq DESC",
            (SESSION_ID,),
        )
        picked: list[Any] = []
        used = 0
        for body, tokens in cursor:
            if used + tokens > budget:
                break
            used += tokens
            picked.append(json.loads(body))
        cursor.close()
        picked.reverse()
        return len(picked)

    async def full_read(self) -> int:
        """Every row, decoded."""
        cursor = self._db.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY seq", (SESSION_ID,)
        )
        return sum(1 for (body,) in cursor if json.loads(body))

    def extra_metrics(self) -> dict[str, float]:
        """Time spent in sqlite3 and in tiktoken, separately."""
        return {"sqlite_s": self._sqlite_s, "tiktoken_s": self._tiktoken_s}

    async def close(self) -> None:
        """Commit anything pending and close."""
        self._commit()
        self._db.close()
