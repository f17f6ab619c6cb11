"""Restore and pin: re-including groups, undoing events, summaries and their siblings."""

from __future__ import annotations

import pytest

from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from strategies.messages import Message
from tests.conformance.toy_strategies import ExcludeOldest, ReduceResults, SummarizeOldest
from tests.groups.conversations import assistant, call, result, system, tool, user
from tests.strategies.invariants import assert_projection_invariants


def _chat() -> list[Message]:
    return [
        system("sys", "be brief"),
        user("u1", "weather?"),
        assistant("a1", call("c1", "weather")),
        tool("t1", result("c1", "sunny")),
        assistant("a2", "sunny"),
        user("u2", "tomorrow?"),
        assistant("a3", "rain"),
        user("u3", "thanks"),
    ]


async def _sent(store: InMemoryHistoryStore) -> list[str]:
    messages = await store.context("s")
    assert_projection_invariants(messages)
    return [m.message_id for m in messages]


@pytest.fixture
async def chat_store(store: InMemoryHistoryStore) -> InMemoryHistoryStore:
    await store.append("s", _chat())
    return store


async def test_restore_groups_reincludes_and_pins(chat_store: InMemoryHistoryStore) -> None:
    store = chat_store
    full = await _sent(store)
    excluded = await store.compact("s", ExcludeOldest(2))
    assert excluded is not None
    restored = await store.restore("s", group_ids=["group_a1"])
    assert restored is not None and restored.phase == "restore"
    assert restored.restored == ("group_a1",) and restored.strategy == "restore"
    assert restored.tokens_after > restored.tokens_before
    assert "a1" in await _sent(store) and "u1" not in await _sent(store)
    assert (await store.view("s")).group("group_a1").pinned
    # a pinned group is never excluded again by a strategy
    again = await store.compact("s", ExcludeOldest(10))
    assert again is not None and "group_a1" not in again.excluded
    assert await store.restore("s", group_ids=["group_a1"]) is None  # already active
    assert set(await _sent(store)) <= set(full)


async def test_restore_event_undoes_exclusions_summaries_and_reductions(
    chat_store: InMemoryHistoryStore,
) -> None:
    store = chat_store
    full = await _sent(store)
    reduced = await store.compact("s", ReduceResults())
    assert reduced is not None
    summarized = await store.compact("s", SummarizeOldest(2))
    assert summarized is not None
    (summary_id, replaced), *_ = summarized.summarized.items()
    undo = await store.restore("s", event_id=summarized.id)
    assert undo is not None
    assert set(undo.restored) == set(replaced) and undo.excluded == (summary_id,)
    assert await _sent(store) == full
    summary = next(g for g in await store.excluded("s") if g.group_id == summary_id)
    assert summary.reason == "restored" and summary.event_id == undo.id
    # the reduction is still there until its own event is restored
    sent = {m.message_id: m for m in await store.context("s")}
    assert sent["t1"] != _chat()[3]
    undo_reduction = await store.restore("s", event_id=reduced.id)
    assert undo_reduction is not None and undo_reduction.restored == ("group_a1",)
    sent = {m.message_id: m for m in await store.context("s")}
    assert sent["t1"] == _chat()[3]
    assert await store.restore("s", event_id=summarized.id) is None  # nothing left to undo


async def test_restoring_one_group_restores_its_summary_siblings(
    chat_store: InMemoryHistoryStore,
) -> None:
    store = chat_store
    full = await _sent(store)
    event = await store.compact("s", SummarizeOldest(3))
    assert event is not None
    (summary_id, replaced), *_ = event.summarized.items()
    undo = await store.restore("s", group_ids=[replaced[1]])
    assert undo is not None
    assert set(undo.restored) == set(replaced) and undo.excluded == (summary_id,)
    assert await _sent(store) == full
    view = await store.view("s")
    assert all(view.group(g).pinned for g in replaced)


async def test_nested_summaries_restore_up_the_chain(chat_store: InMemoryHistoryStore) -> None:
    store = chat_store
    full = await _sent(store)
    inner = await store.compact("s", SummarizeOldest(2))
    outer = await store.compact("s", SummarizeOldest(2))
    assert inner is not None and outer is not None
    (inner_id, inner_replaced), *_ = inner.summarized.items()
    (outer_id, outer_replaced), *_ = outer.summarized.items()
    assert inner_id in outer_replaced
    nested = await _sent(store)
    undo = await store.restore("s", group_ids=[inner_replaced[0]])
    assert undo is not None
    # the inner summary was hidden already: the restore hides the outer one only, and
    # undoing the restore brings back the outer summary alone
    assert set(undo.excluded) == {outer_id}
    assert await _sent(store) == full
    excluded = {g.group_id: g for g in await store.excluded("s")}
    assert excluded[inner_id].event_id == outer.id
    redo = await store.restore("s", event_id=undo.id)
    assert redo is not None
    assert await _sent(store) == nested
    excluded = {g.group_id: g for g in await store.excluded("s")}
    assert excluded[inner_id].summary_group_id == outer_id
    assert all(excluded[g].summary_group_id == inner_id for g in inner_replaced)


async def test_undoing_a_restore_of_nested_summaries_hides_what_they_replaced(
    store: InMemoryHistoryStore,
) -> None:
    """Found by the property test: restoring the inner summary's event, then undoing
    that restore, left the outer summary beside the inner one it replaced."""
    chat = [tool(f"m{i}", result("c_a", "ok")) for i in range(3)]
    for message in chat:
        await store.append("s", [message])
    inner = await store.compact("s", SummarizeOldest(2))
    outer = await store.compact("s", SummarizeOldest(2))
    assert inner is not None and outer is not None
    nested = [(g.group_id, g.summary_of) for g in (await store.view("s")).groups]
    undo = await store.restore("s", event_id=inner.id)
    assert undo is not None
    assert {g.group_id for g in (await store.view("s")).groups} == {
        f"group_{m.message_id}" for m in chat
    }
    redo = await store.restore("s", event_id=undo.id)
    assert redo is not None
    assert [(g.group_id, g.summary_of) for g in (await store.view("s")).groups] == nested


async def test_restoring_a_restore_brings_the_summary_back(
    chat_store: InMemoryHistoryStore,
) -> None:
    store = chat_store
    event = await store.compact("s", SummarizeOldest(2))
    assert event is not None
    summarized_view = await _sent(store)
    undo = await store.restore("s", event_id=event.id)
    assert undo is not None
    redo = await store.restore("s", event_id=undo.id)
    assert redo is not None
    assert await _sent(store) == summarized_view
    summary_id = next(iter(event.summarized))
    excluded = {g.group_id: g for g in await store.excluded("s")}
    assert all(excluded[g].summary_group_id == summary_id for g in event.summarized[summary_id])


async def test_restore_arguments_are_checked(chat_store: InMemoryHistoryStore) -> None:
    store = chat_store
    with pytest.raises(InvalidInput):
        await store.restore("s")
    with pytest.raises(InvalidInput):
        await store.restore("s", group_ids=["group_u1"], event_id="evt_x")
    with pytest.raises(InvalidInput, match="group_nope"):
        await store.restore("s", group_ids=["group_nope"])
    with pytest.raises(InvalidInput, match="evt_nope"):
        await store.restore("s", event_id="evt_nope")


async def test_every_restore_is_audited(chat_store: InMemoryHistoryStore) -> None:
    store = chat_store
    event = await store.compact("s", ExcludeOldest(3))
    assert event is not None
    undo = await store.restore("s", event_id=event.id)
    assert undo is not None
    assert [e.id for e in await store.audit("s", phase="restore")] == [undo.id]
    assert undo.params == {"event_id": event.id}
    stats = await store.stats("s")
    assert stats.active_messages == stats.stored_messages and stats.events == 2
