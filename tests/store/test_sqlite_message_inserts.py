"""SQLite's message rows go in multi-row statements (one FTS5 flush a statement, not a
row), and a statement that bound large texts is bound again with nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event, text

from store import HistoryStore
from store.sql.append.inserts import INSERT_CHUNK, KEPT_TEXT, MESSAGE_COLUMNS
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer

_INSERT = "INSERT INTO chatledger_messages"


def _messages(count: int, prefix: str, words: int = 3) -> list[Message]:
    return [
        Message.text_message(
            "user" if i % 2 == 0 else "assistant",
            f"{prefix} message {i} " + "lorem " * words,
            message_id=f"{prefix}-{i}",
        )
        for i in range(count)
    ]


async def _recorded(path: Path, messages: list[Message]) -> tuple[list[tuple[str, Any]], Any]:
    url = f"sqlite+aiosqlite:///{path}"
    seen: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        if args[2].startswith(_INSERT):
            seen.append((args[2], args[3]))

    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        event.listen(store.engine.sync_engine, "before_cursor_execute", record)
        await store.append("s", messages)
        event.remove(store.engine.sync_engine, "before_cursor_execute", record)
        stored = [m.message for m in await store.history("s", include_excluded=True)]
        async with store.engine.connect() as conn:
            found = await conn.execute(
                text("SELECT rowid FROM chatledger_search WHERE chatledger_search MATCH 'lorem'")
            )
            indexed = len(found.all())
    return seen, (stored, indexed)


async def test_an_append_sends_its_rows_a_chunk_a_statement(tmp_path: Path) -> None:
    messages = _messages(INSERT_CHUNK + 50, "a")
    seen, (stored, indexed) = await _recorded(tmp_path / "a.db", messages)
    assert len(seen) == 2, [sql[:80] for sql, _ in seen]
    sizes = [(len(params) - 1) // len(MESSAGE_COLUMNS) for _, params in seen]
    assert sizes == [INSERT_CHUNK, 50]
    assert all(params[-1] == 1 for _, params in seen)
    assert [m.message_id for m in stored] == [m.message_id for m in messages]
    assert indexed == len(messages)


async def test_a_statement_of_large_texts_is_bound_again_with_nothing(tmp_path: Path) -> None:
    messages = _messages(2, "b", words=KEPT_TEXT // 6 + 1)
    seen, (stored, indexed) = await _recorded(tmp_path / "b.db", messages)
    assert len(seen) == 2, [sql[:80] for sql, _ in seen]
    (first_sql, first), (again_sql, again) = seen
    assert again_sql == first_sql
    assert first[-1] == 1 and any(value is not None for value in first[:-1])
    assert again[-1] == 0 and all(value is None for value in again[:-1])
    assert [m.text for m in stored] == [m.text for m in messages]
    assert indexed == 2


async def test_a_single_row_goes_as_before(tmp_path: Path) -> None:
    seen, (stored, indexed) = await _recorded(tmp_path / "c.db", _messages(1, "c"))
    assert len(seen) == 1 and "SELECT" not in seen[0][0]
    assert len(stored) == 1 and indexed == 1
