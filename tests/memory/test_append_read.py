"""Issue #4's behaviour on the in-memory store: append, read, sessions, tenants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store.errors import InvalidInput, SessionNotFound
from store.memory import InMemoryHistoryStore
from store.models import Provenance
from strategies.groups import annotate
from strategies.messages import Message
from strategies.tokenizers import (
    CharacterEstimatorTokenizer,
    CountingTokenizer,
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


async def test_append_assigns_gapless_seq_and_anchors(store: InMemoryHistoryStore) -> None:
    ids = await store.append("s", _chat()[:2])
    ids += await store.append("s", _chat()[2:])
    assert ids == [m.message_id for m in _chat()]
    stored = await store.history("s")
    assert [m.seq for m in stored] == [1, 2, 3, 4, 5]
    assert all(m.anchor == m.seq and m.slot == 0 for m in stored)
    assert [m.message for m in stored] == _chat()


async def test_incremental_annotation_matches_whole_annotation(
    store: InMemoryHistoryStore,
) -> None:
    chat = _chat()
    for message in chat:  # one at a time: the late result joins its call's group
        await store.append("s", [message])
    whole = dict(annotate(chat).message_groups)
    assert {m.message_id: m.group_id for m in await store.history("s")} == whole
    kinds = {m.message_id: m.kind for m in await store.history("s")}
    assert kinds["t1"] == "tool_call" and kinds["u1"] == "user"


async def test_token_counts_use_the_store_tokenizer_once() -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    store = InMemoryHistoryStore(tokenizer=counting)
    await store.append("s", _chat())
    first = counting.calls
    assert first > 0
    await store.append("s", _chat())  # all already stored: nothing counted again
    assert counting.calls == first
    for stored in await store.history("s"):
        assert stored.token_count == count_message_tokens(stored.message, TOKENIZER)


async def test_same_id_same_content_is_skipped(store: InMemoryHistoryStore) -> None:
    await store.append("s", _chat())
    await store.append("s", [_chat()[0], user("u3", "more")])
    assert [m.message_id for m in await store.history("s")] == [
        *[m.message_id for m in _chat()],
        "u3",
    ]


async def test_same_id_other_content_raises_and_stores_nothing(
    store: InMemoryHistoryStore,
) -> None:
    await store.append("s", _chat())
    with pytest.raises(InvalidInput, match="u1"):
        await store.append("s", [user("u9", "new"), user("u1", "changed")])
    assert len(await store.history("s")) == len(_chat())
    with pytest.raises(InvalidInput):
        await store.append("t", [user("x", "a"), user("x", "b")])
    with pytest.raises(SessionNotFound):
        await store.history("t")


async def test_empty_append_creates_nothing(store: InMemoryHistoryStore) -> None:
    assert await store.append("s", []) == []
    assert await store.sessions() == []
    with pytest.raises(InvalidInput):
        await store.append("", [user("u", "x")])
    with pytest.raises(InvalidInput):
        await store.append("s", ["not a message"])  # type: ignore[list-item]


async def test_history_paging(store: InMemoryHistoryStore) -> None:
    await store.append("s", [user(f"u{i}", f"m{i}") for i in range(10)])
    assert [m.seq for m in await store.history("s", limit=3)] == [1, 2, 3]
    assert [m.seq for m in await store.history("s", after=3, limit=2)] == [4, 5]
    assert [m.seq for m in await store.history("s", before=8, limit=2)] == [6, 7]
    assert [m.seq for m in await store.history("s", after=2, before=5)] == [3, 4]
    assert await store.history("s", limit=0) == []
    streamed = [m.seq async for m in store.aiter_history("s", page_size=3, after=1, before=9)]
    assert streamed == list(range(2, 9))
    with pytest.raises(InvalidInput):
        await store.history("s", limit=-1)


async def test_history_hides_excluded_unless_asked(store: InMemoryHistoryStore) -> None:
    from tests.conformance.toy_strategies import ExcludeOldest

    await store.append("s", _chat())
    event = await store.compact("s", ExcludeOldest(1))
    assert event is not None
    visible = [m.message_id for m in await store.history("s")]
    everything = await store.history("s", include_excluded=True)
    assert "u1" not in visible and len(everything) == len(_chat())
    hidden = next(m for m in everything if m.message_id == "u1")
    assert hidden.excluded and hidden.excluded_event_id == event.id


async def test_provenance_is_recorded(store: InMemoryHistoryStore) -> None:
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
