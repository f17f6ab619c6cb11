"""Bulk appends: the same rows as turn by turn; on PostgreSQL, COPY and statistics.

A bulk append's slices go to PostgreSQL as binary ``COPY`` (a turn's few rows stay an
``INSERT``): both must store exactly the same rows, on every backend. Once a store has
written enough rows it analyzes the tables, so that ``key = ANY(:keys)`` reads use the
indexes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import event, select, text

from store import HistoryStore
from store.models import Provenance
from store.sql.append.inserts import COPY_MIN_ROWS, INSERT_CHUNK
from store.sql.schema import EARLY_RESULTS, GROUPS, MESSAGES, OPEN_CALLS, SESSIONS
from store.sql.upkeep.statistics import CHECK_EVERY_ROWS, FIRST_ANALYZE_ROWS, UNANALYZED_ROWS
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer

ON_POSTGRES = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)


def _turns(count: int, prefix: str) -> list[Message]:
    out: list[Message] = []
    for i in range(count):
        call = f"{prefix}-c{i}"
        out += [
            Message.text_message("user", f"question {i} ✓ \u0000 nul", message_id=f"{prefix}-u{i}"),
            Message(
                role="assistant",
                message_id=f"{prefix}-a{i}",
                contents=[FunctionCallContent(call_id=call, name="f", arguments={"i": i})],
                metadata={"k": [1, 2.5, None]},
            ),
            Message(
                role="tool",
                message_id=f"{prefix}-t{i}",
                contents=[FunctionResultContent(call_id=call, result={"rows": [i] * 3})],
            ),
        ]
    return out


def _comparable(rows: list[Any]) -> list[dict[str, Any]]:
    # and the revision that wrote a group: one append against one per turn
    skip = {"session_id", "stored_at", "created_at", "imported_at", "written_revision"}
    return [{k: v for k, v in dict(r).items() if k not in skip} for r in rows]


async def test_bulk_and_turn_appends_store_the_same_rows(db_url: str) -> None:
    messages = _turns(COPY_MIN_ROWS, "x")  # 3 x COPY_MIN_ROWS messages: COPY slices
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("copied", messages)
        for start in range(0, len(messages), 3):  # one turn at a time: INSERT
            await store.append("inserted", messages[start : start + 3])
        copied = await store.history("copied", include_excluded=True)
        inserted = await store.history("inserted", include_excluded=True)
        assert [m.message for m in copied] == messages
        assert [m.model_dump(exclude={"session_id", "stored_at"}) for m in copied] == [
            m.model_dump(exclude={"session_id", "stored_at"}) for m in inserted
        ]
        async with store.engine.connect() as conn:
            for table in (MESSAGES, GROUPS):
                found = {}
                for session in ("copied", "inserted"):
                    query = (
                        select(table)
                        .where(table.c.session_id == session)
                        .order_by(*table.primary_key.columns)
                    )
                    found[session] = _comparable(list((await conn.execute(query)).mappings()))
                assert found["copied"] == found["inserted"], table.name
        info = await store.session("copied")
        assert info.stored_messages == len(messages) == info.active_messages


@ON_POSTGRES
async def test_a_store_analyzes_the_tables_once_it_has_written_enough(db_url: str) -> None:
    # the sessions table too: every appended row's foreign-key check reads it, and a plan
    # made while it was empty may walk the recency index instead of the primary key
    tables = (
        "chatledger_sessions",
        "chatledger_messages",
        "chatledger_groups",
        "chatledger_open_calls",
        "chatledger_early_results",
    )
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:

        async def analyzed() -> dict[str, int]:
            query = text(
                "SELECT relname, analyze_count FROM pg_stat_user_tables "
                "WHERE relname = ANY(:tables)"
            )
            async with store.engine.connect() as conn:
                rows = await conn.execute(query, {"tables": list(tables)})
                return {name: int(count) for name, count in rows}

        before = await analyzed()
        assert sorted(before) == sorted(tables)
        await store.append("small", _turns(3, "s"))
        assert await analyzed() == before  # a turn's few rows never analyze
        await store.append("bulk", _turns(FIRST_ANALYZE_ROWS // 3 + 1, "b"))
        assert await analyzed() == {name: count + 1 for name, count in before.items()}


@ON_POSTGRES
async def test_stores_that_each_write_little_analyze_once_together_they_wrote_enough(
    db_url: str,
) -> None:
    # two stores stand for two processes writing one database: neither writes enough
    # rows for its own count to call for an analysis, both together do, and the server
    # counts the rows changed over every connection
    per_turn = len(_turns(1, "x"))
    turns = CHECK_EVERY_ROWS // per_turn + 1  # a batch crosses the check's interval
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tokenizer=tokenizer) as first,
        HistoryStore.open(db_url, tokenizer=tokenizer) as second,
    ):

        async def messages_table() -> tuple[int, int]:
            query = text(
                "SELECT analyze_count, n_mod_since_analyze FROM pg_stat_user_tables "
                "WHERE relname = 'chatledger_messages'"
            )
            async with first.engine.connect() as conn:
                analyzes, changed = (await conn.execute(query)).one()
                return int(analyzes), int(changed)

        async with first.engine.connect() as conn:  # analyzed once: the rule of 1,000
            await conn.execute(text("ANALYZE chatledger_messages"))
            await conn.commit()
        before, _ = await messages_table()
        written = 0
        rounds = FIRST_ANALYZE_ROWS // (2 * turns * per_turn) + 1
        for batch in range(rounds):
            for store, name in ((first, "one"), (second, "two")):
                await store.append(name, _turns(turns, f"{name}{batch}"))
                written += turns * per_turn
        assert written // 2 < FIRST_ANALYZE_ROWS <= written  # each alone is not enough
        deadline = time.monotonic() + 30  # the server publishes its counts within seconds
        while time.monotonic() < deadline:
            analyzes, changed = await messages_table()
            if analyzes > before or changed >= FIRST_ANALYZE_ROWS:
                break
            await asyncio.sleep(0.2)
        analyzes, _ = await messages_table()
        if analyzes == before:  # the counts came after both stores had looked
            await first.append("one", _turns(turns, "late"))
            analyzes, _ = await messages_table()
        assert analyzes == before + 1


@ON_POSTGRES
async def test_tables_never_analyzed_are_analyzed_after_a_hundred_changed_rows(
    db_url: str,
) -> None:
    # fresh tables, planned on guesses, cost the square of a session's groups: writers
    # sharing a new session queued for seconds before the groups reached 1,000 rows
    per_turn = len(_turns(1, "x"))
    turns = CHECK_EVERY_ROWS // per_turn + 1  # each append crosses the check's interval
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:

        async def groups_table() -> int:
            return await _analyses(store, "chatledger_groups")

        assert await groups_table() == 0
        written = 0
        deadline = time.monotonic() + 30  # the server publishes its counts within seconds
        while await groups_table() == 0 and time.monotonic() < deadline:
            await store.append("s", _turns(turns, f"t{written}"))
            written += turns * per_turn
            await asyncio.sleep(0.5)  # a backend publishes its counts at most once a second
        assert await groups_table() == 1
        assert UNANALYZED_ROWS <= written < FIRST_ANALYZE_ROWS


async def _analyses(store: HistoryStore, table: str) -> int:
    """How often the server says ``table`` was analyzed (by anyone)."""
    query = text("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = :table")
    async with store.engine.connect() as conn:
        return int((await conn.execute(query, {"table": table})).scalar_one())


def _statistics_statement(statement: str) -> bool:
    return statement.startswith("ANALYZE") or "pg_stat_user_tables" in statement


def _open_and_early(prefix: str) -> list[Message]:
    """A result before its call (an early result), a call left open, an answered one."""
    return [
        Message(
            role="tool",
            message_id=f"{prefix}-early",
            contents=[FunctionResultContent(call_id=f"{prefix}-late", result="r")],
        ),
        Message.text_message("user", "go", message_id=f"{prefix}-u"),
        Message(
            role="assistant",
            message_id=f"{prefix}-open",
            contents=[FunctionCallContent(call_id=f"{prefix}-never", name="f", arguments={})],
        ),
    ]


_VOLATILE = {"session_id", "stored_at", "created_at", "updated_at", "imported_at", "incarnation"}


async def _rows_of(store: HistoryStore, session_id: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    async with store.engine.connect() as conn:
        for table in (SESSIONS, MESSAGES, GROUPS, OPEN_CALLS, EARLY_RESULTS):
            query = (
                select(table)
                .where(table.c.session_id == session_id)
                .order_by(*table.primary_key.columns)
            )
            rows = (await conn.execute(query)).mappings()
            found[table.name] = [
                {k: v for k, v in dict(r).items() if k not in _VOLATILE} for r in rows
            ]
    return found


async def test_appends_to_many_sessions_store_what_an_append_a_session_stores(
    db_url: str,
) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for way in ("bulk", "one"):  # a session that holds messages already
            await store.append(f"{way}-held", _turns(1, "h"))
        parts = [
            ("blank", _turns(2, "a")),
            ("calls", _open_and_early("b")),
            ("held", _turns(2, "h2")),
            ("twice", _turns(1, "t1")),  # one session named twice in the batch
            ("big", _turns(COPY_MIN_ROWS, "g")),
            ("twice", _turns(1, "t2")),
        ]
        provenance = Provenance(system="openai-chat", source_ids={"a-u0": "line 1"})
        stored = await store.append_sessions(
            [(f"bulk-{sid}", messages, provenance) for sid, messages in parts]
        )
        assert stored == sum(len(messages) for _, messages in parts)
        for sid, messages in parts:
            await store.append(f"one-{sid}", messages, provenance=provenance)
        for sid in dict.fromkeys(sid for sid, _ in parts):
            bulk, one = await _rows_of(store, f"bulk-{sid}"), await _rows_of(store, f"one-{sid}")
            assert bulk == one, sid
            assert bulk["chatledger_messages"], sid
            assert (await store.context(f"bulk-{sid}")) == (await store.context(f"one-{sid}"))
        calls = await _rows_of(store, "bulk-calls")
        assert [r["call_id"] for r in calls["chatledger_open_calls"]] == ["b-never"]
        assert [r["call_id"] for r in calls["chatledger_early_results"]] == ["b-late"]


async def test_blank_sessions_are_written_in_as_many_statements_whatever_their_number(
    db_url: str,
) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        sync_engine = store.engine.sync_engine
        statements: list[str] = []

        def record(*args: Any) -> None:
            statements.append(args[2])

        counts = []
        for number in (25, 100):  # every statement of either many rows (a COPY or not)
            statements.clear()
            event.listen(sync_engine, "before_cursor_execute", record)
            try:
                await store.append_sessions(
                    [(f"s{number}-{i}", _turns(2, f"m{i}"), None) for i in range(number)]
                )
            finally:
                event.remove(sync_engine, "before_cursor_execute", record)
            # leaving out the planner statistics' own: the look at the counts, the analysis;
            # SQLite's message rows go in statements of at most INSERT_CHUNK rows (of their
            # own, for the search index), a COPY's or an executemany's in one
            inserts = [s for s in statements if s.startswith("INSERT INTO chatledger_messages")]
            rows = 6 * number
            assert len(inserts) <= -(-rows // INSERT_CHUNK), inserts
            others = [s for s in statements if s not in inserts]
            counts.append(len([s for s in others if not _statistics_statement(s)]))
        assert counts[0] == counts[1] <= 7, statements


@ON_POSTGRES
async def test_tables_whose_counters_were_reset_are_not_taken_for_never_analyzed(
    db_url: str,
) -> None:
    # a database created from a template, or a server after a crash: the times of
    # analysis are gone, the catalog still counts the rows; analyzing a large table
    # inside a turn would cost that turn seconds
    per_turn = len(_turns(1, "x"))
    turns = CHECK_EVERY_ROWS // per_turn + 1  # each append crosses the check's interval
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        await store.append("s", _turns(turns, "a"))
        async with store.engine.connect() as conn:
            await conn.execute(text("ANALYZE"))
            await conn.execute(text("SELECT pg_stat_reset()"))
            await conn.commit()
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as fresh:
        for n in range(3):
            await fresh.append("s", _turns(turns, f"b{n}"))
            await asyncio.sleep(1.2)  # a backend publishes its counts at most once a second
        written = 3 * turns * per_turn
        # past the rule for tables never analyzed, short of the one for analyzed ones
        assert UNANALYZED_ROWS * 2 <= written < FIRST_ANALYZE_ROWS
        assert await _analyses(fresh, "chatledger_messages") == 0
