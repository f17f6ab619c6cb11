"""Opening a SQL store: on a URL (closed twice safely), or on an engine it leaves open."""

from __future__ import annotations

from store import HistoryStore
from store.sql.drivers.engine import create_engine
from strategies.tokenizers import CharacterEstimatorTokenizer, TiktokenTokenizer
from tests.groups.conversations import user


async def test_open_and_close_forms(db_url: str) -> None:
    opened = await HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer())
    try:
        await opened.append("s", [user("u1", "hi")])
    finally:
        await opened.aclose()
        await opened.aclose()
    async with HistoryStore.open(db_url) as again:
        assert isinstance(again.tokenizer, TiktokenTokenizer)
        assert [m.message_id for m in await again.history("s")] == ["u1"]


async def test_from_engine_leaves_the_engine_open(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        async with HistoryStore.from_engine(engine, tokenizer=CharacterEstimatorTokenizer()) as s:
            await s.append("s", [user("u1", "hi")])
        again = await HistoryStore.from_engine(engine, tokenizer=CharacterEstimatorTokenizer())
        assert [m.message_id for m in await again.history("s")] == ["u1"]
        await again.aclose()
        async with engine.connect() as conn:  # still usable: the store did not dispose it
            await conn.exec_driver_sql("SELECT 1")
    finally:
        await engine.dispose()
