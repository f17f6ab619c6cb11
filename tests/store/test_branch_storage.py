"""What a fork writes in SQL: no message row (``docs/branches.md``, "How SQL stores it")."""

from __future__ import annotations

from sqlalchemy import func, select

from store import HistoryStore
from store.sql.schema import LINEAGE, MESSAGES
from strategies.messages import Message
from tests.conformance.toy_strategies import TOKENIZER, SummarizeOldest


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


async def _summary_of_a_summary(store: HistoryStore) -> list[tuple[str, str]]:
    """Session ``s``: five questions, the first two summarized, then that summary and the
    third (a summary of a summary); what its history holds."""
    questions = [Message.text_message("user", f"q{i}", message_id=f"u{i}") for i in range(5)]
    await store.append("s", questions)
    await store.compact("s", SummarizeOldest(2))
    await store.compact("s", SummarizeOldest(2))
    held = [(m.message_id, m.kind) for m in await store.history("s", include_excluded=True)]
    assert [kind for _, kind in held].count("summary") == 2
    return held


async def test_a_fork_at_the_end_carries_a_summary_of_a_summary(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        held = await _summary_of_a_summary(store)
        info = await store.fork("s", new_session_id="f")
        assert info.fork_message_id == "u4"
        forked = [(m.message_id, m.kind) for m in await store.history("f", include_excluded=True)]
        assert forked == held
        assert [m.message_id for m in await store.context("f")] == [
            m.message_id for m in await store.context("s")
        ]
        (event,) = await store.audit("f")
        assert event.params["dropped_summaries"] == []


async def test_a_compaction_after_restoring_a_rewind_takes_a_free_seq(db_url: str) -> None:
    """A rewind's tail is a fork at the end: it used to drop the summary of a summary
    while holding its row, and the restore brought that row back without its group,
    under a ``next_seq`` at the row's own seq; the next compaction, writing the same
    summary again, failed on the messages' primary key (or message id)."""
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        held = await _summary_of_a_summary(store)
        rewind = await store.rewind("s", to=None)
        assert rewind is not None
        await store.restore("s", event_id=rewind.id)
        await store.compact("s", SummarizeOldest(2))  # raised StoreError (IntegrityError)
        after = [(m.message_id, m.kind) for m in await store.history("s", include_excluded=True)]
        assert after[: len(held)] == held
        assert [kind for _, kind in after].count("summary") == 3
