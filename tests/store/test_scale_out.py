"""The schema stays ready to be distributed by session (Citus, or partitioning).

Every primary key and unique constraint starts with the tenant and session keys, every
foreign key stays inside one session, and every statement of a turn (the provider's
two phases) names its session, so that a distributed PostgreSQL with ``session_id`` as
its distribution column routes each to one shard. Checked on the migrated PostgreSQL
schema, so that a later revision cannot break it unnoticed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import event, inspect
from sqlalchemy.engine import Connection

from store import HistoryStore
from store.provider import TwoPhaseProvider
from store.sql.migrations import migrate
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer

ON_POSTGRES = pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres)]
)
KEYS = ["tenant", "session_id"]
BOOKKEEPING = (
    "chatledger_alembic_version",
    "chatledger_schema_revisions",
    "chatledger_settings",
    "chatledger_tenant_keys",
    "chatledger_keys",
    "chatledger_key_events",
)
"""The migrations' own tables, the database's settings and the tenants' keys, not a
session's data (reference tables under Citus: read when a store opens, never by a
turn)."""


def _constraints(connection: Connection) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    inspector = inspect(connection)
    for table in inspector.get_table_names():
        if not table.startswith("chatledger_") or table in BOOKKEEPING:
            continue
        found[table] = {
            "primary": inspector.get_pk_constraint(table)["constrained_columns"],
            "unique": [i["column_names"] for i in inspector.get_indexes(table) if i.get("unique")]
            + [u["column_names"] for u in inspector.get_unique_constraints(table)],
            "foreign": [
                (f["constrained_columns"], f["referred_columns"])
                for f in inspector.get_foreign_keys(table)
            ],
        }
    return found


@ON_POSTGRES
async def test_every_key_starts_with_the_tenant_and_the_session(db_url: str) -> None:
    await migrate(db_url)
    async with HistoryStore.open(db_url) as store, store.engine.connect() as conn:
        found = await conn.run_sync(_constraints)
    assert len(found) == 11  # with the branches' lineage and branch rows, the search vectors, usage
    for table, keys in found.items():
        assert keys["primary"][:2] == KEYS, table
        for columns in keys["unique"]:
            assert columns[:2] == KEYS, (table, columns)
        for constrained, referred in keys["foreign"]:
            # a foreign key joins rows of one session: it starts with both keys, both ends
            assert constrained[:2] == KEYS and referred[:2] == KEYS, (table, constrained)


def _turn(i: int) -> list[Message]:
    call = f"c{i}"
    return [
        Message.text_message("user", f"question {i} " + "word " * 30),
        Message(
            role="assistant",
            contents=[FunctionCallContent(call_id=call, name="search", arguments={"q": i})],
        ),
        Message(role="tool", contents=[FunctionResultContent(call_id=call, result="r " * 300)]),
        Message.text_message("assistant", f"answer {i} " + "word " * 30),
    ]


_QUIET = re.compile(
    r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SELECT pg_|ANALYZE|SHOW|select pg_)", re.I
)


@ON_POSTGRES
async def test_every_statement_of_a_turn_names_its_session(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as store:
        provider = TwoPhaseProvider(store, max_context_window_tokens=3_000, max_output_tokens=500)
        for i in range(6):  # enough for compactions to be written
            await provider.save_turn("warm", _turn(i), end_of_turn=True)
        statements: list[str] = []

        def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            statements.append(statement)

        event.listen(store.engine.sync_engine, "before_cursor_execute", record)
        try:
            for i in range(6, 12):
                await provider.load("warm", _turn(i)[:1])
                await provider.save_turn("warm", _turn(i), end_of_turn=True)
        finally:
            event.remove(store.engine.sync_engine, "before_cursor_execute", record)
        events = await store.audit("warm")
    assert events  # the turns compacted: their write-backs were recorded too
    touching = [s for s in statements if "chatledger_" in s and not _QUIET.match(s)]
    assert touching
    for statement in touching:
        assert "session_id" in statement, statement
