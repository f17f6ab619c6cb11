"""The statements of a turn's steps, counted (not timed): each step reads what it needs
in as few statements as the backend allows, since on a server each is a round trip.

- an append looks up the open calls and the early results of its call ids at once;
- a compaction's write-back loads the touched groups and their anchors' neighbours at
  once (PostgreSQL's one statement takes them from the snapshot where no writer moved
  the session since);
- a projection reads the session row once: on PostgreSQL the key and the excluded
  totals come with the group and message rows, not from a read after them;
- after the store's own writes, a view reads what its cache entry lacks with the session
  row, in one statement: a compaction's snapshot the groups the append changed, a
  projection the messages of the groups it sends that the entry lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from sqlalchemy import event

from store import HistoryStore
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import ExcludeOldest


@contextmanager
def _recorded(store: HistoryStore, noted: Callable[[str], str | None]) -> Iterator[list[str]]:
    """What ``noted`` makes of each statement the store runs meanwhile (None: skipped)."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        note = noted(statement)
        if note is not None:
            seen.append(note)

    engine = store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _selects(store: HistoryStore) -> AbstractContextManager[list[str]]:
    """The ``SELECT`` statements run meanwhile, whole (a locking read among them: the
    session row locked in a ``WITH`` query of its own)."""

    def read(statement: str) -> str | None:
        head = statement.lstrip().upper()
        return statement if head.startswith(("SELECT", "WITH LOCKED_SESSION")) else None

    return _recorded(store, read)


def _first_table(statement: str) -> str:
    found = re.search(r"\bFROM\s+(\w+)", statement)
    return found.group(1) if found else ""


def _reading(statements: list[str], table: str) -> list[str]:
    return [s for s in statements if f"FROM chatledger_{table}" in s]


async def test_an_append_looks_calls_and_early_results_up_in_one_statement(db_url: str) -> None:
    async with HistoryStore.open(db_url) as store:
        await store.append("s", _chat("a"))
        with _selects(store) as seen:
            await store.append("s", _chat("b"))  # a call and its result
        lookups = [s for s in seen if "open_calls" in s or "early_results" in s]
        assert len(lookups) == 1
        assert "chatledger_open_calls" in lookups[0] and "chatledger_early_results" in lookups[0]


async def test_a_compaction_loads_its_groups_in_one_statement(db_url: str, backend: str) -> None:
    async with HistoryStore.open(db_url) as store:
        for n in range(3):
            await store.append("s", _chat(f"c{n}"))
    async with HistoryStore.open(db_url) as fresh:  # nothing cached: the view is read
        with _selects(fresh) as seen:
            assert await fresh.compact("s", ExcludeOldest(2)) is not None
        # the snapshot's active groups, then the write transaction's groups and
        # neighbours; where the write-back is one statement (PostgreSQL) it is made from
        # the snapshot's (no writer moved the session since that read), read before it
        assert len(_reading(seen, "groups")) == (1 if backend == "postgres" else 2)


async def test_a_projection_reads_the_session_row_once(db_url: str) -> None:
    async with HistoryStore.open(db_url) as store:
        for n in range(3):
            await store.append("s", _chat(f"c{n}"))
        expected = await store.context("s")
    async with HistoryStore.open(db_url) as fresh:  # nothing cached: groups and messages read
        with _selects(fresh) as seen:
            assert await fresh.context("s") == expected
        sessions = [s for s in seen if _first_table(s) == "chatledger_sessions"]
        assert len(sessions) == 1
        assert len(_reading(seen, "groups")) == 1 and len(_reading(seen, "messages")) == 1


async def test_after_its_own_writes_a_turn_reads_each_view_in_one_statement(
    db_url: str, backend: str
) -> None:
    async with HistoryStore.open(db_url) as store:
        for n in range(3):
            await store.append("s", _chat(f"c{n}"))
        await store.context("s")
        await store.append("s", _chat("d"))
        with _selects(store) as seen:
            await store.compact("s", ExcludeOldest(0))  # plans on the snapshot, changes nothing
        (snapshot,) = seen
        if backend == "postgres":
            # the append's statement returned the rows it wrote, which the cache holds:
            # the snapshot reads the session row alone
            assert "JOIN" not in snapshot and _first_table(snapshot) == "chatledger_sessions"
        else:
            assert "JOIN chatledger_groups" in snapshot
        await store.compact("s", ExcludeOldest(1))
        with _selects(store) as seen:
            context = await store.context("s")
        (projection,) = seen
        assert "JOIN chatledger_messages" in projection
        with _selects(store) as seen:
            assert await store.context("s") == context
        assert [_first_table(s) for s in seen] == ["chatledger_sessions"]
    async with HistoryStore.open(db_url) as fresh:
        assert await fresh.context("s") == context


def _statements(store: HistoryStore) -> AbstractContextManager[list[str]]:
    """The first word of every statement run meanwhile."""
    return _recorded(store, lambda s: s.lstrip().split()[0].upper())


async def test_a_current_view_is_one_statement_and_a_moved_one_is_read_again(
    db_url: str,
) -> None:
    async with HistoryStore.open(db_url) as store, HistoryStore.open(db_url) as other:
        for n in range(3):
            await store.append("s", _chat(f"c{n}"))
        await store.context("s")  # the view, cached
        await store.append("s", _chat("d"))
        with _statements(store) as seen:
            assert await store.compact("s", ExcludeOldest(0)) is None
        assert seen == ["SELECT"]  # no BEGIN: the one statement is its own snapshot
        await store.compact("s", ExcludeOldest(1))
        with _statements(store) as seen:
            await store.context("s")
        assert seen == ["SELECT"]
        await other.append("s", _chat("e"))  # the store's entry has moved on
        with _statements(store) as seen:
            context = await store.context("s")
        assert context == await other.context("s")
        assert [m.message_id for m in context][-1] == "eu3"
        if "sqlite" in db_url:  # the read begins its snapshot, then reads the row again
            assert seen[:3] == ["SELECT", "BEGIN", "SELECT"]
