"""Writers sharing a session, each a store of its own (a process each, in production).

Each compacts after its turn, and their plans mostly agree: a group another writer
excluded since the snapshot is done, not a conflict. A store that sees another writer
wrote the session since it last did first reads the touched groups without a lock, so
that a plan carried out already ends without a write transaction (on SQLite, without
the database's write lock; on PostgreSQL, without queueing for the session's row).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from store import HistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import ExcludeOldest, Interfering
from tests.groups.conversations import user


@asynccontextmanager
async def _two_writers(db_url: str) -> AsyncIterator[tuple[HistoryStore, HistoryStore, list[str]]]:
    """Two stores on one database, the first one's write transactions counted; the
    second has written the session since the first did."""
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as mine,
        HistoryStore.open(db_url, tokenizer=tokenizer) as other,
    ):
        await mine.append("s", _chat())
        await mine.context("s")
        await other.append("s", [user("u4", "and the day after?")])
        writes: list[str] = []
        write = mine._write

        async def counted(operation: Callable[[Any], Awaitable[Any]]) -> Any:
            writes.append(getattr(operation, "__qualname__", "write"))
            return await write(operation)

        mine._write = counted  # type: ignore[method-assign]
        yield mine, other, writes


async def test_a_plan_another_writer_carried_out_takes_no_write_transaction(db_url: str) -> None:
    async with _two_writers(db_url) as (mine, other, writes):

        async def the_other_does_it() -> None:
            await other.compact("s", ExcludeOldest(2))

        strategy = Interfering(ExcludeOldest(2), the_other_does_it)
        assert await mine.compact("s", strategy) is None
        assert strategy.plans == 1 and writes == []
        assert [e.outcome for e in await mine.audit("s")] == ["applied"]
        excluded = {g.group_id for g in await mine.excluded("s")}
        assert excluded == {"group_u1", "group_a1"}


async def test_what_is_left_of_a_plan_applies_in_one_write(db_url: str) -> None:
    async with _two_writers(db_url) as (mine, other, writes):

        async def the_other_does_part() -> None:
            await other.compact("s", ExcludeOldest(1))

        strategy = Interfering(ExcludeOldest(2), the_other_does_part)
        event = await mine.compact("s", strategy)
        assert event is not None and event.excluded == ("group_a1",)
        assert strategy.plans == 1 and len(writes) == 1
        assert [e.outcome for e in await mine.audit("s")] == ["applied", "applied"]


async def test_a_plan_whose_group_another_writer_pinned_is_made_again(db_url: str) -> None:
    async with _two_writers(db_url) as (mine, other, writes):
        pinned: list[str] = []

        async def the_other_pins_it() -> None:
            if not pinned:
                pinned.extend(await other.pin("s", ["group_u1"]))

        strategy = Interfering(ExcludeOldest(1), the_other_pins_it)
        event = await mine.compact("s", strategy)
        # seen without the lock: planned again on a view with the pin, then applied
        assert strategy.plans == 2 and len(writes) == 1
        assert event is not None and event.excluded == ("group_a1",)
