"""The store's conformance suite: the same behaviour on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store import HistoryStore
from store.errors import InvalidInput, SessionNotFound
from store.sql.engine import create_engine
from strategies.messages import (
    Message,
)
from strategies.tokenizers import CharacterEstimatorTokenizer, TiktokenTokenizer
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.store.helpers import comparable, expected_groups, group_rows, open_call_rows


async def test_seq_is_gapless_and_groups_match_whole_annotation(store: HistoryStore) -> None:
    messages = [
        system("s1", "rules"),
        user("u1", "question"),
        assistant("r1", reasoning()),
        assistant("a1", call("c1"), call("c2")),
        tool("t1", result("c1")),
        user("u2", "and?"),
        tool("t2", result("c2")),  # late result joins its call's group
        assistant("a2", call("c3")),
        tool("t3", result("nope")),  # orphan
        assistant("a3", "done"),
    ]
    for start in range(0, len(messages), 3):
        await store.append("s", messages[start : start + 3])
    stored = await store.history("s")
    assert [m.seq for m in stored] == list(range(1, len(messages) + 1))
    assert [m.message for m in stored] == messages
    assert comparable(await group_rows(store, "s")) == expected_groups(store, messages)
    assert await open_call_rows(store, "s") == {"c3": ("group_a2", False)}
    info = await store.session("s")
    groups = expected_groups(store, messages)
    assert info.stored_messages == info.active_messages == len(messages)
    assert info.stored_groups == info.active_groups == len(groups)
    assert info.stored_tokens == sum(g["token_count"] for g in groups.values())


async def test_late_result_answering_two_pending_groups_merges_them(store: HistoryStore) -> None:
    messages = [
        user("u1", "go"),
        assistant("a1", call("x")),
        assistant("a2", call("y")),
        tool("t1", result("x"), result("y")),
    ]
    await store.append("s", messages[:3])
    await store.append("s", messages[3:])
    rows = await group_rows(store, "s")
    assert comparable(rows) == expected_groups(store, messages)
    assert "group_a2" not in rows
    assert [m.group_id for m in await store.history("s")][1:] == ["group_a1"] * 3
    assert await open_call_rows(store, "s") == {}
    assert (await store.session("s")).stored_groups == 2


async def test_sessions_listing_and_metadata(store: HistoryStore) -> None:
    for name in ("c", "a", "b"):
        await store.append(name, [Message.text_message("user", name)])
    assert [s.session_id for s in await store.sessions()] == ["a", "b", "c"]
    assert [s.session_id for s in await store.sessions(limit=2)] == ["a", "b"]
    assert [s.session_id for s in await store.sessions(after="a")] == ["b", "c"]
    marker = max(s.updated_at for s in await store.sessions())
    await store.set_metadata("a", {"topic": "x", "n": [1, 2]})
    assert await store.get_metadata("a") == {"topic": "x", "n": [1, 2]}
    recent = await store.sessions(updated_since=marker + timedelta(microseconds=1))
    assert [s.session_id for s in recent] == ["a"]
    assert await store.sessions(updated_since=datetime.now(UTC) + timedelta(hours=1)) == []
    await store.set_metadata("fresh", {"k": "v"})
    assert (await store.session("fresh")).stored_messages == 0


async def test_delete_session(store: HistoryStore) -> None:
    await store.append("s", [user("u1", "hi"), assistant("a1", call("c1"))])
    await store.append("t", [user("u1", "hi")])
    await store.delete_session("s")
    with pytest.raises(SessionNotFound):
        await store.history("s")
    with pytest.raises(SessionNotFound):
        await store.delete_session("s")
    assert await group_rows(store, "s") == {}
    assert await open_call_rows(store, "s") == {}
    assert [m.message_id for m in await store.history("t")] == ["u1"]
    await store.append("s", [user("u1", "again")])
    assert [m.seq for m in await store.history("s")] == [1]


async def test_missing_session(store: HistoryStore) -> None:
    for call_ in (store.history("nope"), store.get_metadata("nope"), store.session("nope")):
        with pytest.raises(SessionNotFound, match="nope"):
            await call_


async def test_tokenizer_mismatch_and_recount(db_url: str) -> None:
    message = Message.text_message("user", "a fairly long sentence " * 5)
    async with HistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer()) as first:
        await first.append("s", [message])
        estimated = (await first.session("s")).stored_tokens
    async with HistoryStore.open(db_url, tokenizer=TiktokenTokenizer("o200k_base")) as second:
        with pytest.raises(InvalidInput) as info:
            await second.append("s", [Message.text_message("user", "more")])
        assert "character" in str(info.value).lower() and "o200k_base" in str(info.value)
        recounted = await second.recount("s")
        assert recounted.tokenizer == "o200k_base"
        assert recounted.stored_tokens == recounted.active_tokens == second.count_tokens(message)
        assert recounted.stored_tokens != estimated
        [stored] = await second.history("s")
        assert stored.token_count == recounted.stored_tokens
        assert (await group_rows(second, "s"))[stored.group_id]["token_count"] == stored.token_count
        await second.append("s", [Message.text_message("user", "more")])


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
