"""The store's conformance suite: the same behaviour on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from store import HistoryStore
from store.errors import InvalidInput, SessionNotFound
from store.models import Provenance
from store.sql.engine import create_engine
from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)
from strategies.tokenizers import CharacterEstimatorTokenizer, TiktokenTokenizer
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.store.helpers import comparable, expected_groups, group_rows, open_call_rows


def every_content_message() -> Message:
    return Message(
        role="assistant",
        message_id="m-all",
        author_name="bot",
        created_at=datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=2))),
        metadata={"source": {"nested": [1, 2.5, None, "x"]}},
        contents=[
            TextContent(text="héllo ✓", extra={"annotations": [{"k": 1}]}),
            ReasoningContent(text="think", payload={"sig": "abc"}),
            FunctionCallContent(call_id="c1", name="f", arguments={"a": [1, {"b": None}]}),
            FunctionResultContent(call_id="c0", result={"ok": True}, is_error=False),
            DataContent(data="aGVsbG8=", media_type="image/png"),
            UriContent(uri="https://example.invalid/x.pdf", media_type="application/pdf"),
            OtherContent(kind="mcp_call", payload={"server": "s"}, call_id="h1", pairing="call"),
        ],
    )


async def test_round_trip_keeps_every_field(store: HistoryStore) -> None:
    message = every_content_message()
    assert await store.append("s", [message]) == ["m-all"]
    [stored] = await store.history("s")
    assert stored.message == message
    assert stored.message.created_at is not None
    assert stored.message.created_at.utcoffset() == timedelta(0)
    assert stored.seq == stored.anchor == 1
    assert stored.slot == 0
    assert stored.token_count == store.count_tokens(message)
    assert stored.kind == "tool_call"
    assert stored.session_id == "s" and stored.tenant == "default"


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


async def test_duplicate_ids(store: HistoryStore) -> None:
    first = Message.text_message("user", "hi", message_id="m1")
    assert await store.append("s", [first, first]) == ["m1", "m1"]
    assert await store.append("s", [first]) == ["m1"]
    assert [m.message_id for m in await store.history("s")] == ["m1"]
    changed = Message.text_message("user", "other", message_id="m1")
    with pytest.raises(InvalidInput, match="m1"):
        await store.append("s", [Message.text_message("user", "new", message_id="m2"), changed])
    with pytest.raises(InvalidInput, match="twice"):
        await store.append(
            "s",
            [
                Message.text_message("user", "a", message_id="m3"),
                Message.text_message("user", "b", message_id="m3"),
            ],
        )
    assert [m.message_id for m in await store.history("s")] == ["m1"]
    assert (await store.session("s")).revision == 1


async def test_same_id_in_two_sessions_is_two_messages(store: HistoryStore) -> None:
    message = Message.text_message("user", "hi", message_id="m1")
    await store.append("a", [message])
    await store.append("b", [message])
    assert [m.seq for m in await store.history("b")] == [1]


async def test_paging(store: HistoryStore) -> None:
    messages = [Message.text_message("user", f"m{i}", message_id=f"id{i}") for i in range(12)]
    await store.append("s", messages)
    assert [m.seq for m in await store.history("s", limit=5)] == [1, 2, 3, 4, 5]
    assert [m.seq for m in await store.history("s", after=5, limit=3)] == [6, 7, 8]
    assert [m.seq for m in await store.history("s", before=4)] == [1, 2, 3]
    assert [m.seq for m in await store.history("s", before=10, limit=2)] == [8, 9]
    assert [m.seq for m in await store.history("s", after=3, before=6)] == [4, 5]
    streamed = [m.seq async for m in store.aiter_history("s", page_size=5)]
    assert streamed == list(range(1, 13))
    assert [m.seq async for m in store.aiter_history("s", after=9, page_size=2)] == [10, 11, 12]


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


async def test_invalid_input(store: HistoryStore) -> None:
    with pytest.raises(InvalidInput):
        await store.append("", [user("u1", "x")])
    with pytest.raises(InvalidInput):
        await store.append("s", ["not a message"])  # type: ignore[list-item]
    assert await store.append("s", []) == []


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


async def test_provenance(store: HistoryStore) -> None:
    stamp = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    messages = [user("u1", "hi"), assistant("a1", "yo")]
    await store.append(
        "s",
        messages,
        provenance=Provenance(
            system="openai_jsonl", imported_at=stamp, source_ids={"u1": "line-1"}
        ),
    )
    first, second = await store.history("s")
    assert (first.source_system, first.source_id, first.imported_at) == (
        "openai_jsonl",
        "line-1",
        stamp,
    )
    assert second.source_id is None and second.source_system == "openai_jsonl"


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
