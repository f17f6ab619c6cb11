"""The round trips of a turn on PostgreSQL, counted (not timed).

A turn is what an agent's harness does once per user turn: ``append`` the run's
messages, ``compact(..., phase="after_run")``, then ``context`` for the next call.

How they are counted: every exchange with the server goes through the asyncpg
connection's protocol object, one call of it for each request the client sends and
waits on (a simple query, which may hold several statements, such as
``BEGIN; SELECT set_config(...)``; a prepare; an execution of a prepared statement; an
``executemany``, whose parameter sets asyncpg sends in one pipeline before it waits;
closing a statement). The test puts a counting stand-in between each connection the
store checks out and its protocol, so it counts exchanges, not statements, and it
leaves the store's own execution path as it is (a SQLAlchemy statement listener would
not: the store runs its prepared statements through SQLAlchemy whenever one listens).
``COPY`` is counted as two exchanges (the server answers the ``COPY`` before the data
is sent); a turn's small append does not use it.

The counts are of a turn after a few others (each statement prepared on the
connection, the view cache warm), on a direct connection. Behind a transaction pooler
statements are not kept prepared and each transaction's ``BEGIN`` also makes the
connection's settings: its counts are higher, and not asserted here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from store import HistoryStore
from strategies import ContextWindowCompactionStrategy
from strategies.groups import annotate
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import ExcludeOldest
from tests.groups.conversations import assistant, call, result, system, tool, user

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)

_EXCHANGES = {
    "query": 1,
    "prepare": 1,
    "bind": 1,
    "execute": 1,
    "bind_execute": 1,
    "bind_execute_many": 1,
    "copy_in": 2,
    "copy_out": 2,
    "close_statement": 1,
}
"""The asyncpg protocol's calls that talk to the server, and the round trips of each."""


class _CountingProtocol:
    """Stands between an asyncpg connection and its protocol, noting each exchange."""

    def __init__(self, protocol: Any, seen: list[str]) -> None:
        self._protocol = protocol
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._protocol, name)
        trips = _EXCHANGES.get(name)
        if trips is None:
            return found
        seen = self._seen

        async def counted(*args: Any, **kwargs: Any) -> Any:
            what = args[0] if args else None
            text = what if isinstance(what, str) else getattr(what, "query", None)
            seen.extend([f"{name}: {text or ''}"[:120]] * trips)
            return await found(*args, **kwargs)

        return counted


@contextmanager
def _counting(store: HistoryStore) -> Iterator[list[str]]:
    """The exchanges of the store's connections with the server meanwhile."""
    seen: list[str] = []
    wrapped: list[Any] = []

    def checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        raw = dbapi_connection._connection  # SQLAlchemy's adapter holds asyncpg's
        if not isinstance(raw._protocol, _CountingProtocol):
            raw._protocol = _CountingProtocol(raw._protocol, seen)
            wrapped.append(raw)

    pool = store.engine.sync_engine.pool
    event.listen(pool, "checkout", checkout)
    try:
        yield seen
    finally:
        event.remove(pool, "checkout", checkout)
        for raw in wrapped:
            raw._protocol = raw._protocol._protocol


def sent_statements(seen: list[str]) -> list[str]:
    """The exchanges of ``seen`` that send a statement: not its prepare, nor asyncpg's
    reads of the types of its parameters, which it makes once a connection (their text
    is not the statement's)."""
    return [e for e in seen if e.split(":", 1)[1].strip() and not e.startswith("prepare")]


Step = Callable[[], Awaitable[object]]


async def _turn(
    store: HistoryStore, steps: dict[str, Step]
) -> tuple[dict[str, list[str]], dict[str, object]]:
    """The exchanges of each step of one turn, and what each step returned."""
    counts: dict[str, list[str]] = {}
    results: dict[str, object] = {}
    for name, step in steps.items():
        with _counting(store) as seen:
            results[name] = await step()
        counts[name] = list(seen)
    return counts, results


def _steps(store: HistoryStore, prefix: str, strategy: Any) -> dict[str, Step]:
    return {
        "append": lambda: store.append("s", _chat(prefix)),
        "compact": lambda: store.compact("s", strategy, phase="after_run"),
        "context": lambda: store.context("s"),
    }


async def test_a_turn_whose_compaction_writes_nothing(db_url: str) -> None:
    strategy = ContextWindowCompactionStrategy(
        max_context_window_tokens=128_000, max_output_tokens=16_384
    )
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for n in range(3):
            await _turn(store, _steps(store, f"w{n}", strategy))
        counts, results = await _turn(store, _steps(store, "t", strategy))
    assert results["compact"] is None
    sizes = {step: len(seen) for step, seen in counts.items()}
    # append: every write in one statement, planned from the session row the last turn's
    # context read, gated by the session's revision and on none of its ids stored and
    # none of its calls open (what a read would have found); compact: its snapshot, a
    # read of the session row alone (the cache holds the rows the append wrote)
    assert sizes == {"append": 1, "compact": 1, "context": 1}, counts
    assert sum(sizes.values()) <= 4


async def test_a_turn_whose_compaction_writes(db_url: str) -> None:
    strategy = ExcludeOldest(1)
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for n in range(3):
            await _turn(store, _steps(store, f"w{n}", strategy))
        counts, results = await _turn(store, _steps(store, "t", strategy))
    assert results["compact"] is not None  # an event: the compaction wrote
    sizes = {step: len(seen) for step, seen in counts.items()}
    # compact: its snapshot (one read, of the session row alone: the append's statement
    # returned the rows it wrote, which the cache holds), then one statement for the
    # event, its links, the messages' exclusion, the groups' rows and the session row,
    # gated by the snapshot's revision
    assert sizes == {"append": 1, "compact": 2, "context": 1}, counts
    assert sum(sizes.values()) <= 8


async def _waiting_for_a_lock(other: Any) -> None:
    """Until a backend of the database waits for a lock (the store's, behind ``other``)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    )
    for _ in range(3_000):
        if await other.fetchval(query):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the store never waited for the session row")


async def _after_a_writer(store: HistoryStore, db_url: str, step: Step) -> list[str]:
    """The executions of ``step`` when it waits for the session row held by another
    transaction, which moves the session's revision before it commits."""
    dsn = make_url(db_url).set(drivername="postgresql").render_as_string(hide_password=False)
    other = await asyncpg.connect(dsn)
    try:
        transaction = other.transaction()
        await transaction.start()
        await other.execute("SELECT 1 FROM chatledger_sessions WHERE session_id = 's' FOR UPDATE")
        with _counting(store) as seen:
            task = asyncio.ensure_future(step())
            await _waiting_for_a_lock(other)
            await other.execute(
                "UPDATE chatledger_sessions SET revision = revision + 1 WHERE session_id = 's'"
            )
            await transaction.commit()
            await task
        # the reads made again are new on this connection: not counting their prepares
        return [exchange for exchange in seen if not exchange.startswith("prepare")]
    finally:
        await other.close()


async def test_a_write_that_waited_for_the_lock_reads_again_under_it(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for n in range(3):
            await _turn(store, _steps(store, f"w{n}", ExcludeOldest(1)))
        appended = await _after_a_writer(store, db_url, lambda: store.append("s", _chat("t")))
        # the one statement planned from the session row the last context read, which
        # waited for the row and then wrote nothing (the revision had moved after its
        # snapshot, so it is sent again); sent again, it sees the write (not an append:
        # nothing to land after) and writes nothing; then the read, and the one
        # statement planned from it, which writes
        assert len(appended) == 4, "\n".join(appended)
        assert appended[0].startswith("bind_execute: WITH written_session"), appended
        assert appended[1].startswith("bind_execute: WITH written_session"), appended
        assert appended[2].startswith("bind_execute: SELECT"), appended
        assert appended[3].startswith("bind_execute: WITH written_session"), appended
        assert [m.message_id for m in await store.context("s")][-1] == "tu3"
        async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as cold:
            for n in range(2):  # its statements prepared, their types known
                await cold.append("warm", _chat(f"w{n}"))
            appended = await _after_a_writer(cold, db_url, lambda: cold.append("s", _chat("v")))
        # a store that knows no row of the session reads it first: the read and the one
        # statement, which waited for the row and then wrote nothing (sent again, it
        # sees the write and writes nothing); then the transactional append: BEGIN, the
        # session row locked with its reads, the messages, the groups, the session row,
        # COMMIT
        assert len(appended) == 9, "\n".join(appended)
        assert appended[1].startswith("bind_execute: WITH written_session"), appended
        assert appended[2].startswith("bind_execute: WITH written_session"), appended
        assert appended[3].startswith("query: BEGIN"), appended
        assert [m.message_id for m in await store.context("s")][-1] == "vu3"
        compacted = await _after_a_writer(
            store, db_url, lambda: store.compact("s", ExcludeOldest(1), phase="after_run")
        )
        # the snapshot, then the one statement made from it (this store wrote the
        # session last), which waited for the row and then wrote nothing (the revision
        # had moved after its snapshot, so it is sent again); sent again, it sees the
        # write (off the write chain: nothing to land after) and writes nothing; then
        # the groups read without a lock (the plan still applies to them) and the one
        # statement, which writes, at the revision read
        assert len(compacted) == 5, "\n".join(compacted)
        assert compacted[1].startswith("bind_execute: WITH written_session"), compacted
        assert compacted[2].startswith("bind_execute: WITH written_session"), compacted
        assert compacted[3].startswith("bind_execute: SELECT"), compacted
        assert compacted[4].startswith("bind_execute: WITH written_session"), compacted
        context = await store.context("s")
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as fresh:
        assert await fresh.context("s") == context


def _one_at_a_time() -> list[Message]:
    return [
        system("s0", "be brief"),
        user("u1", "hi"),
        assistant("a1", call("c1", "f"), call("c2", "g")),
        tool("t1", result("c1", "one")),  # answers a stored call: its group is read
        tool("t2", result("c2", "two")),
        assistant("a2", "done"),
        tool("t9", result("c9", "early")),  # a result before its call
        assistant("a9", call("c9", "h")),  # joins the result's stored group: a merge
        user("u3", "bye"),
    ]


async def test_appends_go_in_one_statement_unless_they_merge_stored_groups(db_url: str) -> None:
    messages = _one_at_a_time()
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for message in messages:  # every statement prepared, every type known
            await store.append("warm", [message])
        sizes: dict[str, list[str]] = {}
        for message in messages:
            with _counting(store) as seen:
                await store.append("s", [message])
            sizes[message.message_id] = [e.split(":")[1].split()[0] for e in seen]
        stored = await store.history("s")
        assert [m.group_id for m in stored] == [g for _, g in annotate(messages).message_groups]
        assert (await store.doctor("s")).findings == ()
    one = ["SELECT", "WITH"]  # the reads, then every write in one statement
    with_groups = ["SELECT", "SELECT", "WITH"]  # the stored groups the new one touches
    assert sizes["u1"] == sizes["a1"] == sizes["a2"] == sizes["t9"] == one, sizes
    assert sizes["t1"] == sizes["t2"] == sizes["u3"] == with_groups, sizes
    # the merge: the reads, then the transactional append, which reads under the lock
    assert sizes["a9"][:3] == ["SELECT", "SELECT", "BEGIN"], sizes
    # no one statement: the only WITH is the transaction's locked read of the session row
    assert sizes["a9"][-1] == "COMMIT;" and sizes["a9"].count("WITH") == 1, sizes
    assert sizes["a9"][3] == "WITH", sizes


async def _projected_after_another_writer(
    db_url: str, last: Callable[[HistoryStore], Awaitable[object]] | None = None
) -> tuple[list[str], list[Message], list[Message]]:
    """Turns of two stores on one session, each appending and projecting in turn, then an
    append of the first (its own groups, whose messages its cache lacks), of the second
    (groups written since the first last read) and ``last`` of the second: the first's
    projection's exchanges, what it sent, and what a new store sends."""
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as first,
        HistoryStore.open(db_url, tokenizer=tokenizer) as second,
    ):
        for n in range(3):
            await first.append("s", _chat(f"a{n}"))
            await first.context("s")
            await second.append("s", _chat(f"b{n}"))
            await second.context("s")
        await first.append("s", _chat("a3"))
        await second.append("s", _chat("b3"))
        if last is not None:
            await last(second)
        with _counting(first) as seen:
            shown = await first.context("s")
        async with HistoryStore.open(db_url, tokenizer=tokenizer) as fresh:
            expected = await fresh.context("s")
    return seen, shown, expected


async def test_a_projection_after_another_writer_is_one_statement(db_url: str) -> None:
    seen, shown, expected = await _projected_after_another_writer(db_url)
    # the session row, the groups the other store wrote since, and the messages of
    # those and of this store's own append, in one statement: no snapshot begun
    assert len(seen) == 1, seen
    assert shown == expected
    assert [m.message_id for m in shown][-2:] == [m.message_id for m in _chat("b3")][-2:]


async def test_a_projection_after_a_write_off_the_chain_reads_as_before(db_url: str) -> None:
    async def retitle(store: HistoryStore) -> None:  # a write that is not of the write chain
        await store.set_title("s", "renamed")

    seen, shown, expected = await _projected_after_another_writer(db_url, retitle)
    assert shown == expected
    assert len(sent_statements(seen)) > 1, seen  # read again, in a snapshot
