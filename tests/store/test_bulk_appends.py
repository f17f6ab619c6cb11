"""Bulk appends: the same rows as turn by turn; on PostgreSQL, COPY and statistics.

A bulk append's slices go to PostgreSQL as binary ``COPY`` (a turn's few rows stay an
``INSERT``): both must store exactly the same rows, on every backend. Once a store has
written enough rows it analyzes the tables, so that ``key = ANY(:keys)`` reads use the
indexes.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, text

from store import HistoryStore
from store.sql.append.pipeline import COPY_MIN_ROWS
from store.sql.schema import GROUPS, MESSAGES
from store.sql.statistics import FIRST_ANALYZE_ROWS
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
    skip = {"session_id", "stored_at", "created_at", "imported_at"}
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
