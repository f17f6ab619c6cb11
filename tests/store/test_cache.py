"""The store's cache of active views: always current, bounded, and actually used.

The stateful machine of ``test_stateful`` drives one store, so its cache only ever sees
that store's own writes. Here the SQL side is two stores on one database, each call
going to the next one, so each store also sees the other's writes only through the
database: a cache that missed one would give an answer the in-memory model does not.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test
from sqlalchemy import event

from store import HistoryStore
from store.sql.projection.cache import SessionCache
from store.sql.schema import GROUPS
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.reduction import ToolResultReductionStrategy
from strategies.view import Totals
from tests.conformance.toy_strategies import ExcludeOldest, SummarizeOldest
from tests.store.test_stateful import SETTINGS, TOKENIZER, StoreMachine

SESSION = "s"


def upper(text: str) -> str:
    """A reducer that keeps the length and changes the text."""
    return text.upper()


def halve(text: str) -> str:
    """A reducer that changes the token count."""
    return text[: len(text) // 2]


class Alternating:
    """Two stores on one database; each method call goes to the next one in turn."""

    def __init__(self, first: HistoryStore, second: HistoryStore) -> None:
        self._stores = (first, second)
        self._turns: Iterator[int] = itertools.cycle((0, 1))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stores[next(self._turns)], name)

    async def aclose(self) -> None:
        for store in self._stores:
            await store.aclose()


def test_two_stores_on_one_database_match_the_memory_model(db_url: str) -> None:
    async def open_pair(tenant: str) -> Alternating:
        first = await HistoryStore.open(db_url, tenant=tenant, tokenizer=TOKENIZER)
        second = await HistoryStore.open(db_url, tenant=tenant, tokenizer=TOKENIZER)
        return Alternating(first, second)

    machine: Callable[[], Any] = lambda: StoreMachine(open_pair)  # noqa: E731
    run_state_machine_as_test(machine, settings=SETTINGS)


def _turn(n: int) -> list[Message]:
    call = FunctionCallContent(call_id=f"c{n}", name="fetch", arguments={"q": n})
    result = FunctionResultContent(call_id=f"c{n}", result=" ".join(["word"] * (20 + n)))
    return [
        Message.text_message("user", f"question {n}", message_id=f"u{n}"),
        Message(role="assistant", message_id=f"a{n}", contents=[call]),
        Message(role="tool", message_id=f"t{n}", contents=[result]),
        Message.text_message("assistant", f"answer {n}", message_id=f"x{n}"),
    ]


class Statements:
    """The SQL statements a store's engine runs, by first word and table."""

    def __init__(self, store: HistoryStore) -> None:
        self.seen: list[str] = []
        event.listen(store.engine.sync_engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.seen.append(" ".join(statement.split()))

    def _reads(self, table: str) -> list[str]:
        # a table read alone, or joined to the session row read with it
        named = (f"FROM chatledger_{table}", f"JOIN chatledger_{table}")
        return [s for s in self.seen if s.startswith("SELECT") and any(n in s for n in named)]

    def message_reads(self) -> list[str]:
        return self._reads("messages")

    def group_reads(self) -> list[str]:
        return self._reads("groups")


async def test_an_unchanged_session_is_projected_from_the_cache(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        for n in range(5):
            await store.append(SESSION, _turn(n))
        first = await store.context(SESSION)
        statements = Statements(store)
        assert await store.context(SESSION) == first
        assert statements.message_reads() == []
        assert statements.group_reads() == []


async def test_own_append_reads_only_the_groups_it_touched(db_url: str, backend: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        for n in range(5):
            await store.append(SESSION, _turn(n))
        await store.context(SESSION)
        statements = Statements(store)
        await store.append(SESSION, _turn(5))
        statements.seen.clear()
        context = await store.context(SESSION)
        async with HistoryStore.open(db_url, tokenizer=TOKENIZER, cache_messages=0) as plain:
            assert context == await plain.context(SESSION)
        if backend == "postgres":
            # the append's one statement returned the rows of the groups it wrote
            assert statements.group_reads() == []
        else:
            # the new turn's groups, by id; not the session's whole active view
            (groups,) = statements.group_reads()
            assert "group_id IN" in groups or "group_id = ANY" in groups
        (messages,) = statements.message_reads()
        assert messages.count("?") + messages.count("$") <= 2 + 4  # tenant, session, ids


@pytest.mark.parametrize("bound", [0, 3, 10])
async def test_the_bound_holds_and_answers_do_not_change(db_url: str, bound: int) -> None:
    async with (
        HistoryStore.open(db_url, tokenizer=TOKENIZER, cache_messages=bound) as small,
        HistoryStore.open(db_url, tokenizer=TOKENIZER, cache_messages=0) as plain,
    ):
        for n in range(8):
            await small.append(f"s{n % 3}", _turn(n))
            if n % 2:
                await small.compact(f"s{n % 3}", ExcludeOldest(1))
            for session in {f"s{m % 3}" for m in range(n + 1)}:
                assert await small.context(session) == await plain.context(session)
                assert small._cache.size <= bound


async def test_writes_through_another_store_are_seen(db_url: str) -> None:
    async with (
        HistoryStore.open(db_url, tokenizer=TOKENIZER) as cached,
        HistoryStore.open(db_url, tokenizer=TOKENIZER) as other,
        HistoryStore.open(db_url, tokenizer=TOKENIZER, cache_messages=0) as plain,
    ):
        writes: list[Callable[[], Awaitable[Any]]] = [
            lambda: other.append(SESSION, _turn(3)),
            lambda: other.compact(SESSION, ToolResultReductionStrategy(reducers={"fetch": upper})),
            lambda: other.compact(SESSION, SummarizeOldest(2)),
            lambda: other.compact(SESSION, ExcludeOldest(1)),
            lambda: other.pin(SESSION, [plain_groups[0]]),
            lambda: other.restore(SESSION, group_ids=[excluded[0]]),
            lambda: other.recount(SESSION),
            lambda: other.delete_session(SESSION),
            lambda: other.append(SESSION, _turn(9)),
        ]
        for n in range(3):
            await cached.append(SESSION, _turn(n))
        for write in writes:
            assert await cached.context(SESSION) == await plain.context(SESSION)
            if await _exists(plain):
                plain_groups = [g.group_id for g in (await plain.view(SESSION)).groups]
                excluded = [g.group_id for g in await plain.excluded(SESSION)] or plain_groups
            await write()
            assert await cached.context(SESSION) == await plain.context(SESSION)
            if await _exists(plain):
                assert (await cached.view(SESSION)).groups == (await plain.view(SESSION)).groups


async def _exists(store: HistoryStore) -> bool:
    return any(s.session_id == SESSION for s in await store.sessions())


async def test_own_compaction_moves_the_cache_without_reading_groups(db_url: str) -> None:
    """After its own compaction the store knows the rows it wrote: the next projection
    reads no group row, and no message but those a reduction changed."""
    reduce = ToolResultReductionStrategy(reducers={"fetch": halve})
    async with (
        HistoryStore.open(db_url, tokenizer=TOKENIZER) as cached,
        HistoryStore.open(db_url, tokenizer=TOKENIZER, cache_messages=0) as plain,
    ):
        for n in range(6):
            await cached.append(SESSION, _turn(n))
        await cached.context(SESSION)
        for strategy, message_reads in (
            (SummarizeOldest(2), 0),
            (ExcludeOldest(1), 0),
            (reduce, 1),
        ):
            assert await cached.compact(SESSION, strategy) is not None
            statements = Statements(cached)
            context = await cached.context(SESSION)
            assert statements.group_reads() == []
            assert len(statements.message_reads()) == message_reads
            assert context == await plain.context(SESSION)
            view, expected = await cached.view(SESSION), await plain.view(SESSION)
            assert view.groups == expected.groups
            assert view.excluded == expected.excluded


def test_an_entry_never_read_passes_on_what_it_carried() -> None:
    """The session moved on while a caught-up entry read its rows (they are not kept):
    the next entry carries the last one that knew its rows, checked the same way."""
    cache = SessionCache()
    message = Message.text_message("user", "hello", message_id="u1")
    row = {c.key: None for c in GROUPS.c} | {"group_id": "g1", "message_count": 1}
    first = cache.entry(SESSION, ("inc", 1))
    assert first is not None
    first.rows = (row,)
    cache.add_messages(SESSION, first, {"g1": ((1, message),)})
    moved = cache.entry(SESSION, ("inc", 2), since=1)
    assert moved is not None and moved.carried is first and moved.messages == {}
    again = cache.entry(SESSION, ("inc", 3), since=1)  # ``moved`` never read its rows
    assert again is not None and again.carried is first
    cache.set_rows(SESSION, again, [row], [], first.excluded or Totals())
    assert again.messages == {"g1": ((1, message),)} and cache.size == 1
    # a chain that starts after the entry's revision carries nothing
    later = cache.entry(SESSION, ("inc", 4), since=4)
    assert later is not None and later.carried is None
