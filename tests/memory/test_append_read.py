"""The in-memory store's sessions and tenants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store.errors import InvalidInput, SessionNotFound
from store.memory import InMemoryHistoryStore
from strategies.messages import Message
from strategies.tokenizers import (
    count_message_tokens,
)
from tests.conformance.toy_strategies import TOKENIZER
from tests.groups.conversations import assistant, call, result, tool, user


def _chat() -> list[Message]:
    return [
        user("u1", "what is the weather"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny")),
        assistant("a2", "it is sunny"),
        user("u2", "thanks"),
    ]


async def test_sessions_listing_and_metadata(store: InMemoryHistoryStore) -> None:
    start = datetime.now(UTC)
    for sid in ("b", "a", "c"):
        await store.append(sid, [user(f"{sid}1", "hi")])
    listed = await store.sessions()
    assert [s.session_id for s in listed] == ["a", "b", "c"]
    assert [s.session_id for s in await store.sessions(after="a", limit=1)] == ["b"]
    assert len(await store.sessions(updated_since=start)) == 3
    assert await store.sessions(updated_since=start + timedelta(days=1)) == []
    info = listed[0]
    assert (info.stored_messages, info.active_messages, info.tenant) == (1, 1, "default")
    await store.set_metadata("a", {"title": "first"})
    assert await store.get_metadata("a") == {"title": "first"}
    await store.set_metadata("new", {"k": 1})  # creates the session
    assert (await store.session("new")).stored_messages == 0
    with pytest.raises(SessionNotFound):
        await store.get_metadata("missing")


async def test_delete_session(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    await store.delete_session("s")
    with pytest.raises(SessionNotFound):
        await store.history("s")
    with pytest.raises(SessionNotFound):
        await store.delete_session("s")
    await store.append("s", _chat()[:1])  # a new session, starting again at seq 1
    assert [m.seq for m in await store.history("s")] == [1]


async def test_tenants_are_isolated(store: InMemoryHistoryStore) -> None:
    other = store.for_tenant("acme")
    await store.append("s", _chat())
    await other.append("s", [user("x", "other tenant")])
    assert [m.message_id for m in await other.history("s")] == ["x"]
    assert len(await store.history("s")) == len(_chat())
    await other.delete_session("s")
    assert len(await store.history("s")) == len(_chat())
    with pytest.raises(SessionNotFound):
        await other.get_metadata("s")
    assert [s.tenant for s in await store.sessions()] == ["default"]
    assert await other.sessions() == []
    assert (await other.stats()).stored_messages == 0
    with pytest.raises(InvalidInput):
        InMemoryHistoryStore(tenant="")


async def test_tokenizer_mismatch_and_recount(store: InMemoryHistoryStore) -> None:
    from strategies.tokenizers import TiktokenTokenizer

    await store.append("s", _chat())
    tiktoken_store = InMemoryHistoryStore(store.database, tokenizer=TiktokenTokenizer())
    with pytest.raises(InvalidInput, match="recount"):
        await tiktoken_store.append("s", [user("u9", "x")])
    with pytest.raises(InvalidInput):
        await tiktoken_store.context("s")
    info = await tiktoken_store.recount("s")
    assert info.tokenizer == "o200k_base"
    for stored in await tiktoken_store.history("s"):
        assert stored.token_count == count_message_tokens(stored.message, TiktokenTokenizer())


async def test_store_is_an_async_context_manager() -> None:
    async with InMemoryHistoryStore(tokenizer=TOKENIZER) as store:
        await store.append("s", _chat())
        assert store.tenant == "default" and store.tokenizer is TOKENIZER
