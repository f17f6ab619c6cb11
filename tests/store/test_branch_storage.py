"""What a fork writes in SQL: no message row (``docs/branches.md``, "How SQL stores it")."""

from __future__ import annotations

from sqlalchemy import func, select

from store import HistoryStore
from store.sql.schema import LINEAGE, MESSAGES
from strategies.messages import Message
from tests.conformance.toy_strategies import TOKENIZER


async def _count(store: HistoryStore, table: object) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


async def test_a_fork_and_a_fork_of_it_write_no_message_row(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        chat = [
            Message.text_message("user" if i % 2 == 0 else "assistant", f"m{i}", message_id=f"m{i}")
            for i in range(40)
        ]
        await store.append("s", chat)
        before = await _count(store, MESSAGES)
        await store.fork("s", at="m20", new_session_id="f")
        await store.fork("f", new_session_id="g")
        assert await _count(store, MESSAGES) == before == 40
        assert len(await store.history("g", include_excluded=True)) == 21
        assert await _count(store, LINEAGE) == 2  # f reads s; g reads s (flattened)
        await store.append("g", [Message.text_message("user", "own", message_id="own")])
        assert await _count(store, MESSAGES) == 41  # only the fork's own message
