"""A history read is the same whether it takes one query (PostgreSQL) or is read a page
of ``PAGE_SIZE`` rows at a time (SQLite, :func:`store.sql.history.read_history`),
whatever its bounds."""

from __future__ import annotations

import pytest

from store import HistoryStore
from store.contract import PAGE_SIZE
from strategies.messages import Message, TextContent

COUNT = 2 * PAGE_SIZE + 37


@pytest.fixture
async def filled(store: HistoryStore) -> list[int]:
    messages = [
        Message(role="user", contents=[TextContent(text=f"m{i}")], message_id=f"m{i}")
        for i in range(COUNT)
    ]
    await store.append("s", messages)
    return [stored.seq for stored in await store.history("s")]


@pytest.mark.parametrize(
    ("limit", "before", "after"),
    [
        (None, None, None),
        (PAGE_SIZE, None, None),
        (PAGE_SIZE + 1, None, 3),
        (None, 2 * PAGE_SIZE, 10),
        (PAGE_SIZE + 5, 2 * PAGE_SIZE + 20, None),
        (2 * PAGE_SIZE, PAGE_SIZE + 3, None),
        (PAGE_SIZE * 3, PAGE_SIZE * 2, 40),
        (0, None, None),
        (0, 50, None),
    ],
)
async def test_a_read_of_many_pages_keeps_its_bounds(
    store: HistoryStore,
    filled: list[int],
    limit: int | None,
    before: int | None,
    after: int | None,
) -> None:
    assert len(filled) == COUNT
    seqs = [s for s in filled if (before is None or s < before) and (after is None or s > after)]
    if limit is not None:
        seqs = seqs[-limit:] if before is not None else seqs[:limit]
        seqs = seqs if limit else []
    read = await store.history("s", limit=limit, before=before, after=after)
    assert [stored.seq for stored in read] == seqs
    assert [stored.message.message_id for stored in read] == [f"m{s - filled[0]}" for s in seqs]
