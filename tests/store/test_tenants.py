"""Tenant isolation: a store for tenant A never reaches tenant B's rows."""

from __future__ import annotations

import pytest

from store import HistoryStore
from store.errors import InvalidInput, SessionNotFound
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.store.helpers import group_rows


async def test_tenants_are_isolated(db_url: str) -> None:
    tokenizer = CharacterEstimatorTokenizer()
    async with (
        HistoryStore.open(db_url, tenant="A", tokenizer=tokenizer) as a,
        HistoryStore.open(db_url, tenant="B", tokenizer=tokenizer) as b,
    ):
        await a.append("shared", [Message.text_message("user", "from A", message_id="m1")])
        await a.set_metadata("shared", {"owner": "A"})
        await a.append("only-a", [Message.text_message("user", "A again")])

        # B sees nothing of A, whatever ids it uses
        assert await b.sessions() == []
        for attempt in (b.history("shared"), b.get_metadata("shared"), b.delete_session("only-a")):
            with pytest.raises(SessionNotFound):
                await attempt
        assert await group_rows(b, "shared") == {}

        # B's writes under the same ids create B's own sessions
        await b.append("shared", [Message.text_message("user", "from B", message_id="m1")])
        await b.set_metadata("shared", {"owner": "B"})
        [mine] = await b.history("shared")
        assert mine.message.text == "from B" and mine.seq == 1 and mine.tenant == "B"
        await b.delete_session("shared")

        # A is untouched
        [theirs] = await a.history("shared")
        assert theirs.message.text == "from A" and theirs.tenant == "A"
        assert await a.get_metadata("shared") == {"owner": "A"}
        assert [s.session_id for s in await a.sessions()] == ["only-a", "shared"]
        assert all(s.tenant == "A" for s in await a.sessions())


async def test_tenant_must_be_named(db_url: str) -> None:
    async with HistoryStore.open(db_url) as store:
        with pytest.raises(InvalidInput):
            HistoryStore(store.engine, tenant="")
