"""Append and read: seq and anchors, incremental grouping, duplicates, paging, provenance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.models import Provenance
from strategies.groups import annotate
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
from strategies.tokenizers import (
    CharacterEstimatorTokenizer,
    CountingTokenizer,
    count_message_tokens,
)
from tests.conformance.conftest import Stores
from tests.conformance.toy_strategies import TOKENIZER, ExcludeOldest
from tests.groups.conversations import assistant, call, result, tool, user


def _chat() -> list[Message]:
    return [
        user("u1", "what is the weather"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny")),
        assistant("a2", "it is sunny"),
        user("u2", "thanks"),
    ]


def every_content_message() -> Message:
    """One message holding every kind of content and every optional field."""
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


async def test_round_trip_keeps_every_field(store: HistoryBackend) -> None:
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


async def test_an_empty_author_name_reads_back(store: HistoryBackend) -> None:
    """The model allows an empty ``author_name``: every read gives back what was stored
    (a SQL read once refused such a row as corrupt, and with it the whole session)."""
    message = Message(role="user", contents=[TextContent(text="hi")], author_name="")
    await store.append("s", [message])
    for read in (
        [m.message for m in await store.history("s")],
        await store.context("s"),
        [m.message async for m in store.aiter_history("s")],
    ):
        assert read == [message]


async def test_created_at_reads_back_in_utc(store: HistoryBackend) -> None:
    """A naive ``created_at`` is taken as UTC, an aware one converted to it, in what every
    read gives back (the SQL columns hold UTC; the in-memory store keeps the same)."""
    east = timezone(timedelta(hours=5, minutes=30))
    naive = Message.text_message("user", "naive", message_id="n")
    naive = naive.model_copy(update={"created_at": datetime(2025, 5, 6, 7, 8, 9)})
    aware = Message.text_message("user", "east", message_id="e")
    aware = aware.model_copy(update={"created_at": datetime(2025, 5, 6, 7, 8, 9, tzinfo=east)})
    await store.append("s", [naive, aware])
    expected = {
        "n": datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC),
        "e": datetime(2025, 5, 6, 1, 38, 9, tzinfo=UTC),
    }
    for read in (
        [m.message for m in await store.history("s")],
        await store.context("s"),
        [m.message async for m in store.aiter_history("s")],
    ):
        assert {m.message_id: m.created_at for m in read} == expected
        assert all(m.created_at is not None and m.created_at.tzinfo is UTC for m in read)
    assert await store.append("s", [naive, aware]) == ["n", "e"]  # the same content
    assert len(await store.history("s")) == 2


async def test_append_assigns_gapless_seq_and_anchors(store: HistoryBackend) -> None:
    ids = await store.append("s", _chat()[:2])
    ids += await store.append("s", _chat()[2:])
    assert ids == [m.message_id for m in _chat()]
    stored = await store.history("s")
    assert [m.seq for m in stored] == [1, 2, 3, 4, 5]
    assert all(m.anchor == m.seq and m.slot == 0 for m in stored)
    assert [m.message for m in stored] == _chat()


async def test_incremental_annotation_matches_whole_annotation(store: HistoryBackend) -> None:
    chat = _chat()
    for message in chat:  # one at a time: the late result joins its call's group
        await store.append("s", [message])
    whole = dict(annotate(chat).message_groups)
    assert {m.message_id: m.group_id for m in await store.history("s")} == whole
    kinds = {m.message_id: m.kind for m in await store.history("s")}
    assert kinds["t1"] == "tool_call" and kinds["u1"] == "user"


async def test_token_counts_use_the_store_tokenizer_once(stores: Stores) -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = await stores.open(tokenizer=counting)
    await store.append("s", _chat())
    first = counting.calls
    assert first > 0
    await store.append("s", _chat())  # all already stored: nothing counted again
    assert counting.calls == first
    for stored in await store.history("s"):
        assert stored.token_count == count_message_tokens(stored.message, TOKENIZER)


async def test_same_id_same_content_is_skipped(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    await store.append("s", [_chat()[0], user("u3", "more")])
    assert [m.message_id for m in await store.history("s")] == [
        *[m.message_id for m in _chat()],
        "u3",
    ]


async def test_same_id_other_content_raises_and_stores_nothing(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    with pytest.raises(InvalidInput, match="u1"):
        await store.append("s", [user("u9", "new"), user("u1", "changed")])
    assert len(await store.history("s")) == len(_chat())
    with pytest.raises(InvalidInput):
        await store.append("t", [user("x", "a"), user("x", "b")])
    with pytest.raises(SessionNotFound):
        await store.history("t")


async def test_duplicate_ids_within_and_across_batches(store: HistoryBackend) -> None:
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


async def test_same_id_in_two_sessions_is_two_messages(store: HistoryBackend) -> None:
    message = Message.text_message("user", "hi", message_id="m1")
    await store.append("a", [message])
    await store.append("b", [message])
    assert [m.seq for m in await store.history("b")] == [1]


async def test_empty_append_creates_nothing(store: HistoryBackend) -> None:
    assert await store.append("s", []) == []
    assert await store.sessions() == []
    with pytest.raises(InvalidInput):
        await store.append("", [user("u", "x")])
    with pytest.raises(InvalidInput):
        await store.append("s", ["not a message"])  # type: ignore[list-item]


async def test_history_paging(store: HistoryBackend) -> None:
    await store.append("s", [user(f"u{i}", f"m{i}") for i in range(12)])
    assert [m.seq for m in await store.history("s", limit=3)] == [1, 2, 3]
    assert [m.seq for m in await store.history("s", after=3, limit=2)] == [4, 5]
    assert [m.seq for m in await store.history("s", before=4)] == [1, 2, 3]
    assert [m.seq for m in await store.history("s", before=8, limit=2)] == [6, 7]
    assert [m.seq for m in await store.history("s", after=2, before=5)] == [3, 4]
    assert await store.history("s", limit=0) == []
    assert [m.seq async for m in store.aiter_history("s", page_size=5)] == list(range(1, 13))
    streamed = [m.seq async for m in store.aiter_history("s", page_size=3, after=1, before=9)]
    assert streamed == list(range(2, 9))
    assert [m.seq async for m in store.aiter_history("s", after=9, page_size=2)] == [10, 11, 12]
    with pytest.raises(InvalidInput):
        await store.history("s", limit=-1)


async def test_history_hides_excluded_unless_asked(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    event = await store.compact("s", ExcludeOldest(1))
    assert event is not None
    visible = [m.message_id for m in await store.history("s")]
    everything = await store.history("s", include_excluded=True)
    assert "u1" not in visible and len(everything) == len(_chat())
    hidden = next(m for m in everything if m.message_id == "u1")
    assert hidden.excluded and hidden.excluded_event_id == event.id


async def test_provenance_is_recorded(store: HistoryBackend) -> None:
    when = datetime(2024, 5, 1, tzinfo=UTC)
    provenance = Provenance(system="openai_jsonl", imported_at=when, source_ids={"u1": "orig-1"})
    await store.append("s", _chat()[:2], provenance=provenance)
    first, second = await store.history("s")
    assert (first.source_system, first.source_id, first.imported_at) == (
        "openai_jsonl",
        "orig-1",
        when,
    )
    assert second.source_system == "openai_jsonl" and second.source_id is None
