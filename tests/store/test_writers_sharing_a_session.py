"""Writers sharing a session, each a store of its own (a process each, in production).

Each compacts after its turn, and their plans mostly agree: a group another writer
excluded since the snapshot is done, not a conflict. A store that sees another writer
wrote the session since it last did first reads the touched groups without a lock (on
PostgreSQL, the one statement's own read), so that a plan carried out already ends
without a write transaction (on SQLite, without the database's write lock; on
PostgreSQL, without queueing for the session's row).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from store import HistoryStore
from store.rules.conflicts import Conflict
from store.sql.compaction.compactor import Done
from store.sql.compaction.one_statement import Moved
from store.sql.projection.views import SqlSource
from strategies.changeset import ChangeSet
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import ExcludeOldest, Fixed, Interfering, ReduceResults
from tests.groups.conversations import assistant, call, result, tool, user
from tests.store.test_cache import Statements


@asynccontextmanager
async def _stores(db_url: str) -> AsyncIterator[tuple[HistoryStore, HistoryStore]]:
    """Two stores on one database (two processes, in production)."""
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as mine,
        HistoryStore.open(db_url, tokenizer=tokenizer) as other,
    ):
        yield mine, other


@asynccontextmanager
async def _two_writers(db_url: str) -> AsyncIterator[tuple[HistoryStore, HistoryStore, list[str]]]:
    """Two stores on one database, the first one's writes counted (its write
    transactions, and its writes in one statement that wrote); the second has written
    the session since the first did."""
    async with _stores(db_url) as (mine, other):
        await mine.append("s", _chat())
        await mine.context("s")
        await other.append("s", [user("u4", "and the day after?")])
        writes: list[str] = []
        write = mine._write

        async def counted(operation: Callable[[Any], Awaitable[Any]]) -> Any:
            writes.append(getattr(operation, "__qualname__", "write"))
            return await write(operation)

        at_once = mine._in_one_statement

        async def counted_at_once(operation: Callable[[Any], Awaitable[Any]]) -> Any:
            done = await at_once(operation)
            if done is not None and not isinstance(done, Done | Conflict | Moved):
                writes.append("one statement")  # what it gives when it wrote nothing
            return done

        mine._write = counted  # type: ignore[method-assign]
        mine._in_one_statement = counted_at_once  # type: ignore[method-assign]
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


async def test_a_reduction_another_writer_made_moot_takes_no_write_transaction(
    db_url: str,
) -> None:
    """A plan that reduces messages never goes in one statement; another writer excluded
    its group meanwhile: the read without a lock shows nothing left, and it ends there."""
    async with _two_writers(db_url) as (mine, other, writes):
        excluded: list[object] = []

        async def the_other_excludes_it() -> None:
            if not excluded:
                excluded.append(await other.compact("s", ExcludeOldest(2)))

        strategy = Interfering(ReduceResults(), the_other_excludes_it)
        assert await mine.compact("s", strategy) is None
        assert strategy.plans == 1 and writes == []
        assert [e.outcome for e in await mine.audit("s")] == ["applied"]  # the other's
        assert {g.group_id for g in await mine.excluded("s")} == {"group_u1", "group_a1"}


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


# -- the view cache of a store whose session another writer wrote -----------------------


def _cached(store: HistoryStore, session_id: str = "s") -> dict[str, Any]:
    """The cache entry's messages of each group (the objects themselves)."""
    entry = store._cache.peek(session_id)
    assert entry is not None
    return dict(entry.messages)


async def _texts(store: HistoryStore) -> str:
    return " ".join(m.text for m in await store.context("s"))


async def test_a_store_keeps_what_it_read_of_groups_another_writer_did_not_change(
    db_url: str,
) -> None:
    async with _stores(db_url) as (mine, other):
        await mine.append("s", _chat())
        await mine.context("s")
        before = _cached(mine)
        await other.append("s", [assistant("a4", "Sun again."), user("u4", "great")])
        await other.compact("s", ExcludeOldest(1))  # a compaction of the chain
        sent = [m.message_id for m in await mine.context("s")]
        assert sent[-2:] == ["a4", "u4"] and "u1" not in sent
        after = _cached(mine)
        kept = [g for g in after if g in before and after[g] is before[g]]
        # every group the other writer left as it was is kept, not read again
        assert set(kept) == set(before) - {"group_u1"}
        assert {"group_a4", "group_u4"} <= set(after)


async def test_a_group_another_writer_added_to_is_read_again(db_url: str) -> None:
    async with _stores(db_url) as (mine, other):
        await mine.append("s", [user("u1", "weather?"), assistant("a1", call("c1", "w"))])
        await mine.context("s")
        before = _cached(mine)
        # the result joins the call's group: its row changes
        await other.append("s", [tool("t1", result("c1", "sunny")), user("u2", "thanks")])
        sent = [m.message_id for m in await mine.context("s")]
        assert sent == ["u1", "a1", "t1", "u2"]
        after = _cached(mine)
        assert after["group_u1"] is before["group_u1"]
        assert after["group_a1"] is not before["group_a1"]


async def test_writes_off_the_chain_make_a_store_read_everything_again(db_url: str) -> None:
    """A redaction, or a compaction's reductions, change messages in place: a store that
    sees one since its entry reads every group again (the redacted text is never sent)."""
    async with _stores(db_url) as (mine, other):
        await mine.append("s", _chat())
        assert "It is sunny." in await _texts(mine)
        before = _cached(mine)
        await other.append("s", [user("u4", "more")])  # of the chain
        await other.redact("s", ["a2"], reason="test")  # off it
        await other.append("s", [assistant("a4", "ok")])  # of the chain again
        assert "It is sunny." not in await _texts(mine)
        after = _cached(mine)
        assert not [g for g in after if g in before and after[g] is before[g]]

        await other.compact("s", ReduceResults())  # reductions: off the chain
        await other.append("s", [user("u5", "and now?")])
        reduced = _cached(mine)
        await mine.context("s")
        again = _cached(mine)
        assert not [g for g in again if g in reduced and again[g] is reduced[g]]


async def _sent_by_a_new_store(db_url: str) -> list[str]:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as fresh:
        return [m.message_id for m in await fresh.context("s")]


async def test_a_store_reads_only_the_group_rows_written_since_it_read(db_url: str) -> None:
    """Another writer's appends and compaction (writes of the chain): the store reads the
    group rows they wrote, in one statement with the session row, not every active
    group again, and sends what a new store would."""
    async with _stores(db_url) as (mine, other):
        await mine.append("s", _chat())
        await mine.context("s")
        await other.append("s", [assistant("a4", "Sun again."), user("u4", "great")])
        await other.compact("s", ExcludeOldest(1))
        await other.append("s", [assistant("a5", "Rain later.")])
        statements = Statements(mine)
        sent = [m.message_id for m in await mine.context("s")]
        assert sent == await _sent_by_a_new_store(db_url)
        assert "u1" not in sent and sent[-3:] == ["a4", "u4", "a5"]
        reads = statements.group_reads()
        assert len(reads) == 1 and "written_revision >" in reads[0]


async def test_an_append_that_absorbs_a_stored_group_breaks_the_chain(db_url: str) -> None:
    """A result stored before its call has a group of its own, which the call's append
    absorbs and deletes: no row tells a reader of the rows written since, so that append
    is off the chain and the store reads every group again."""
    async with _stores(db_url) as (mine, other):
        await mine.append("s", [user("u1", "weather?"), tool("t1", result("c1", "sunny"))])
        await mine.context("s")
        await other.append("s", [assistant("a1", call("c1", "w")), user("u2", "thanks")])
        statements = Statements(mine)
        sent = [m.message_id for m in await mine.context("s")]
        assert sent == await _sent_by_a_new_store(db_url)
        assert not [s for s in statements.group_reads() if "written_revision >" in s]
        entry = mine._cache.peek("s")
        assert entry is not None and entry.views is not None
        assert [view.group_id for view in entry.views] == ["group_u1", "group_a1", "group_u2"]


async def test_what_a_moved_view_loads_is_cached_though_another_writer_commits_meanwhile(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads after a moved session row are one snapshot (on PostgreSQL, where each
    statement sees the latest commit, a read-only ``REPEATABLE READ`` transaction): a
    commit between the row's read and the messages' leaves what they load cacheable."""
    async with _stores(db_url) as (mine, other):
        await mine.append("s", _chat())
        await mine.context("s")
        await other.append("s", [user("u4", "and the day after?")])
        prefetch = SqlSource.prefetch
        commits = [[assistant("a4", "Rain.")]]

        async def committed_meanwhile(source: SqlSource, conn: Any, ids: Any) -> None:
            if commits:
                await other.append("s", commits.pop())
            await prefetch(source, conn, ids)

        monkeypatch.setattr(SqlSource, "prefetch", committed_meanwhile)
        sent = await mine.context("s")
        assert not commits and [m.message_id for m in sent][-1] == "u4"
        entry = mine._cache.peek("s")
        assert entry is not None and entry.views is not None
        assert {view.group_id for view in entry.views} <= set(entry.messages)
        monkeypatch.undo()
        assert [m.message_id for m in await mine.context("s")] == await _sent_by_a_new_store(db_url)


async def test_a_session_others_keep_writing_is_read_from_what_was_written_first(
    db_url: str,
) -> None:
    """Once a view found the session moved by another writer, the next views read the
    group rows written since with the session row first, not after a read of the row
    that finds it moved again: a compaction's snapshot is that one statement (no
    snapshot begun for it), a projection that statement joined to the messages it
    lacks (no snapshot begun either); and they send what a new store would."""
    async with _stores(db_url) as (mine, other):
        await mine.append("s", _chat())
        await mine.context("s")
        await other.append("s", [user("u4", "and the day after?")])
        await mine.context("s")  # found moved
        await other.append("s", [assistant("a4", "Rain.")])
        statements = Statements(mine)
        assert await mine.compact("s", Fixed(ChangeSet())) is None
        assert len(statements.seen) == 1 and "written_revision >" in statements.seen[0]
        await other.append("s", [user("u5", "and then?")])
        statements.seen.clear()
        sent = [m.message_id for m in await mine.context("s")]
        assert sent == await _sent_by_a_new_store(db_url) and sent[-2:] == ["a4", "u5"]
        # the session row, the groups written since, and the messages of those and of
        # the groups this store appended: one statement, so one snapshot without a BEGIN
        assert len(statements.seen) == 1, statements.seen
        assert statements.seen[0].startswith("SELECT chatledger_sessions.")
        assert "written_revision >" in statements.seen[0]
        assert "chatledger_messages.group_id = chatledger_groups.group_id" in statements.seen[0]
        # once a view finds the session as this store left it, the views after it read
        # as a single writer's do
        await mine.append("s", [assistant("a5", "Sun.")])
        await mine.context("s")
        await mine.append("s", [user("u6", "and now?")])
        statements.seen.clear()
        await mine.context("s")
        assert not [s for s in statements.seen if "written_revision >" in s]
