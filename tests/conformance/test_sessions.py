"""Sessions and tenants: listing, metadata, deletion, isolation, the store's lifetime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from strategies.messages import Message
from tests.conformance.conftest import Stores
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


async def test_sessions_listing_and_metadata(store: HistoryBackend) -> None:
    start = datetime.now(UTC)
    for sid in ("c", "a", "b"):
        await store.append(sid, [user(f"{sid}1", "hi")])
    listed = await store.sessions()
    assert [s.session_id for s in listed] == ["a", "b", "c"]
    assert [s.session_id for s in await store.sessions(limit=2)] == ["a", "b"]
    assert [s.session_id for s in await store.sessions(after="a")] == ["b", "c"]
    assert [s.session_id for s in await store.sessions(after="a", limit=1)] == ["b"]
    assert len(await store.sessions(updated_since=start)) == 3
    assert await store.sessions(updated_since=datetime.now(UTC) + timedelta(hours=1)) == []
    info = listed[0]
    assert (info.stored_messages, info.active_messages, info.tenant) == (1, 1, "default")
    marker = max(s.updated_at for s in listed)
    await store.set_metadata("a", {"topic": "x", "n": [1, 2]})
    assert await store.get_metadata("a") == {"topic": "x", "n": [1, 2]}
    recent = await store.sessions(updated_since=marker + timedelta(microseconds=1))
    assert [s.session_id for s in recent] == ["a"]
    await store.set_metadata("new", {"k": 1})  # creates the session
    assert (await store.session("new")).stored_messages == 0
    with pytest.raises(SessionNotFound):
        await store.get_metadata("missing")


async def test_delete_session(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    await store.append("t", [user("u1", "hi")])
    await store.delete_session("s")
    with pytest.raises(SessionNotFound):
        await store.history("s")
    with pytest.raises(SessionNotFound):
        await store.delete_session("s")
    assert [m.message_id for m in await store.history("t")] == ["u1"]
    await store.append("s", _chat()[:1])  # a new session, starting again at seq 1
    assert [m.seq for m in await store.history("s")] == [1]


async def test_missing_session(store: HistoryBackend) -> None:
    for call_ in (store.history("nope"), store.get_metadata("nope"), store.session("nope")):
        with pytest.raises(SessionNotFound, match="nope"):
            await call_


async def test_tenants_are_isolated(stores: Stores) -> None:
    a = await stores.open(tenant="A")
    b = await stores.open(tenant="B")
    await a.append("shared", [Message.text_message("user", "from A", message_id="m1")])
    await a.set_metadata("shared", {"owner": "A"})
    await a.append("only-a", _chat())

    # B sees nothing of A, whatever ids it uses
    assert await b.sessions() == []
    assert (await b.stats()).stored_messages == 0
    for attempt in (b.history("shared"), b.get_metadata("shared"), b.delete_session("only-a")):
        with pytest.raises(SessionNotFound):
            await attempt

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
    assert len(await a.history("only-a")) == len(_chat())
    assert [s.session_id for s in await a.sessions()] == ["only-a", "shared"]
    assert all(s.tenant == "A" for s in await a.sessions())
    with pytest.raises(InvalidInput):
        await stores.open(tenant="")


async def test_store_is_an_async_context_manager(stores: Stores) -> None:
    async with await stores.open() as store:
        await store.append("s", _chat())
        assert store.tenant == "default" and store.tokenizer is TOKENIZER
    again = await stores.open()
    assert len(await again.history("s")) == len(_chat())
