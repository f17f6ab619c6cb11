"""The view cache never serves a deleted session.

A store caches a session's active view under a key read from the session row. A
session deleted and recreated by another store within one tick of the clock, and
brought to the same revision, used to look unchanged to the first store, which then
served the deleted content. The key is now a token drawn when the session row is
created, which never repeats; a frozen clock makes the reproduction deterministic.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from store import HistoryStore
from store.sql.drivers.engine import create_engine
from store.sql.schema import SESSIONS
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer

TOKENIZER = CharacterEstimatorTokenizer()
TICK = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def _texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every session row created in the same tick (a coarse clock)."""
    monkeypatch.setattr("store.sql.sessions.now", lambda: TICK)


@pytest.mark.usefixtures("frozen_clock")
async def test_a_session_recreated_in_the_same_tick_is_not_served_from_the_cache(
    db_url: str,
) -> None:
    async with (
        HistoryStore.open(db_url, tokenizer=TOKENIZER) as reader,
        HistoryStore.open(db_url, tokenizer=TOKENIZER) as writer,
    ):
        await reader.append("s", [Message.text_message("user", "deleted secret")])
        before = await reader.session("s")
        assert _texts(await reader.context("s")) == ["deleted secret"]  # now cached

        await writer.delete_session("s")
        await writer.append("s", [Message.text_message("user", "fresh content")])
        after = await writer.session("s")
        assert (after.created_at, after.revision) == (before.created_at, before.revision)

        assert _texts(await reader.context("s")) == ["fresh content"]
        assert _texts(await (await reader.view("s")).project()) == ["fresh content"]


async def test_every_created_session_draws_its_own_token(db_url: str) -> None:
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        tokens = set()
        for _ in range(5):
            await store.append("s", [Message.text_message("user", "hi")])
            tokens.add(await _token(db_url, "s"))
            await store.delete_session("s")
        assert None not in tokens
        assert len(tokens) == 5


async def test_a_session_without_a_token_is_read_without_the_cache(db_url: str) -> None:
    """A session created by a process of the previous release (no token) is always
    read from the database, never from a stale entry."""
    async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as store:
        await store.append("s", [Message.text_message("user", "one")])
        await _clear_token(db_url, "s")
        assert _texts(await store.context("s")) == ["one"]
        await store.append("s", [Message.text_message("user", "two")])
        assert _texts(await store.context("s")) == ["one", "two"]
        async with HistoryStore.open(db_url, tokenizer=TOKENIZER) as other:
            await other.append("s", [Message.text_message("user", "three")])
        assert _texts(await store.context("s")) == ["one", "two", "three"]


async def _token(url: str, session_id: str) -> str | None:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            query = SESSIONS.select().where(SESSIONS.c.session_id == session_id)
            row = (await conn.execute(query)).mappings().one()
            return row["incarnation"]  # type: ignore[no-any-return]
    finally:
        await engine.dispose()


async def _clear_token(url: str, session_id: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(SESSIONS).where(SESSIONS.c.session_id == session_id).values(incarnation=None)
            )
    finally:
        await engine.dispose()
