"""Compaction write-back issues a bounded number of writes, however many groups it touches.

Counted, not timed: the SQL writes (``INSERT``/``UPDATE``) a compaction or a restore
executes, for a change set touching a few groups and one touching many. An executemany
counts as one statement.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from store import HistoryStore
from tests.conformance.toy_strategies import ExcludeOldest, ReduceResults
from tests.memory.test_compaction import _chat

FEW, MANY = 3, 60
"""Chats per session (each has six groups that may be excluded and one tool result)."""


@contextmanager
def _counting_writes(store: HistoryStore) -> Iterator[list[str]]:
    writes: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            writes.append(statement)

    engine = store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield writes
    finally:
        event.remove(engine, "before_cursor_execute", count)


async def _session(store: HistoryStore, chats: int) -> str:
    session = f"s{chats}"
    for index in range(chats):
        await store.append(session, _chat(f"c{index}_"))
    return session


async def _writes(
    store: HistoryStore, chats: int, operation: Callable[[str], Awaitable[object]]
) -> int:
    session = await _session(store, chats)
    with _counting_writes(store) as writes:
        assert await operation(session) is not None
    return len(writes)


async def test_exclusions_write_a_bounded_number_of_statements(store: HistoryStore) -> None:
    async def exclude(session: str, n: int) -> object:
        event = await store.compact(session, ExcludeOldest(n))
        assert event is not None and len(event.excluded) == n
        return event

    few = await _writes(store, FEW, lambda s: exclude(s, FEW * 5))
    many = await _writes(store, MANY, lambda s: exclude(s, MANY * 5))
    assert many == few


async def test_reductions_write_a_bounded_number_of_statements(store: HistoryStore) -> None:
    async def reduce(session: str) -> object:
        event = await store.compact(session, ReduceResults())
        assert event is not None and len(event.reduced) >= 1
        return event

    assert await _writes(store, MANY, reduce) == await _writes(store, FEW, reduce)


async def test_restores_write_a_bounded_number_of_statements(store: HistoryStore) -> None:
    async def compact_then_restore(session: str, n: int) -> int:
        await store.compact(session, ReduceResults())
        excluded = await store.compact(session, ExcludeOldest(n))
        assert excluded is not None
        with _counting_writes(store) as writes:
            assert await store.restore(session, event_id=excluded.id) is not None
            [reductions] = await store.audit(session, strategy="reduce_results")
            assert await store.restore(session, event_id=reductions.id) is not None
        info = await store.session(session)
        assert info.active_messages == info.stored_messages
        return len(writes)

    few = await compact_then_restore(await _session(store, FEW), FEW * 5)
    many = await compact_then_restore(await _session(store, MANY), MANY * 5)
    assert many == few
