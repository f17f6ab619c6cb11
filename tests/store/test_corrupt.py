"""A row that fails to validate raises CorruptRowError naming it; it is never skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from store import HistoryStore
from store.errors import CorruptRowError
from strategies.messages import Message
from tests.conformance.test_library_strategies import long_result_chat
from tests.conformance.toy_strategies import ExcludeOldest


@pytest.mark.parametrize(
    ("column", "garbage"),
    [
        ("contents", '[{"type": "no-such-content"}]'),
        ("metadata", '["not", "a", "mapping"]'),
    ],
)
async def test_corrupt_json_raises_naming_the_row(
    store: HistoryStore, column: str, garbage: str
) -> None:
    await store.append("s", [Message.text_message("user", f"m{i}") for i in range(3)])
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                f"UPDATE chatledger_messages SET {column} = :garbage "
                "WHERE tenant = 'default' AND session_id = 's' AND seq = 2"
            ),
            {"garbage": garbage},
        )
    with pytest.raises(CorruptRowError) as info:
        await store.history("s")
    assert (
        "'default'" in str(info.value) and "'s'" in str(info.value) and "seq 2" in str(info.value)
    )
    assert info.value.seq == 2
    # the rows before it are still readable
    assert [m.seq for m in await store.history("s", before=2)] == [1]


async def test_invalid_json_text_on_sqlite(tmp_path: Path) -> None:
    """Only SQLite can hold text that is not JSON (PostgreSQL's jsonb rejects it)."""
    async with HistoryStore.open(f"sqlite:///{tmp_path}/c.db") as store:
        await store.append("s", [Message.text_message("user", "hi")])
        async with store.engine.begin() as conn:
            await conn.execute(
                text("UPDATE chatledger_messages SET contents = '[{broken' WHERE seq = 1")
            )
        with pytest.raises(CorruptRowError, match="seq 1"):
            await store.history("s")


async def _corrupt(store: HistoryStore, statement: str) -> None:
    async with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            await conn.execute(text("PRAGMA ignore_check_constraints = ON"))
        else:
            found = await conn.execute(
                text(
                    "SELECT conname FROM pg_constraint WHERE contype = 'c' "
                    "AND conrelid = 'chatledger_groups'::regclass"
                )
            )
            for (name,) in found.all():
                await conn.execute(text(f'ALTER TABLE chatledger_groups DROP CONSTRAINT "{name}"'))
        await conn.execute(text(statement))


async def test_a_corrupt_group_kind_is_reported(store: HistoryStore) -> None:
    await store.append("s", long_result_chat())
    event = await store.compact("s", ExcludeOldest(2))
    assert event is not None
    await _corrupt(
        store, "UPDATE chatledger_groups SET kind = 'no_such_kind' WHERE group_id = 'group_u1'"
    )
    with pytest.raises(CorruptRowError, match="'s'"):
        await store.excluded("s")
    with pytest.raises(CorruptRowError, match="group_u1"):
        await store.why("s", "u1")


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_corrupt_reason_is_reported(store: HistoryStore) -> None:
    """Only SQLite holds bytes that are not text in a text column."""
    await store.append("s", long_result_chat())
    assert await store.compact("s", ExcludeOldest(2)) is not None
    await _corrupt(
        store,
        "UPDATE chatledger_groups SET excluded_reason = X'FFFE' WHERE group_id = 'group_u1'",
    )
    with pytest.raises(CorruptRowError, match="group_u1"):
        await store.excluded("s")
    with pytest.raises(CorruptRowError, match="group_u1"):
        await store.why("s", "u1")
