"""Audit reads: compaction events and their filters, excluded groups, why, stats."""

from __future__ import annotations

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from tests.conformance.test_compaction import _chat
from tests.conformance.toy_strategies import ExcludeOldest, ReduceResults, SummarizeOldest
from tests.groups.conversations import assistant, call, result, tool


async def test_audit_filters(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    await store.append("t", _chat("t"))
    first = await store.compact("s", ExcludeOldest(1), phase="after_run")
    second = await store.compact("s", ReduceResults())
    third = await store.compact("t", ExcludeOldest(1))
    assert first and second and third
    assert [e.id for e in await store.audit("s")] == [second.id, first.id]
    assert {e.id for e in await store.audit()} == {first.id, second.id, third.id}
    assert [e.id for e in await store.audit(phase="after_run")] == [first.id]
    assert [e.id for e in await store.audit(strategy="reduce_results")] == [second.id]
    assert len(await store.audit(limit=1)) == 1
    assert [e.id for e in await store.audit("s", since=second.created_at)] == [second.id]


async def test_why_and_stats(store: HistoryBackend) -> None:
    chat = [*_chat()[:5], assistant("late", call("cx", "never_answered")), *_chat()[5:]]
    chat.append(tool("orphan", result("nobody", "?")))
    await store.append("s", chat)
    event = await store.compact("s", SummarizeOldest(2))
    assert event is not None
    summary_id = next(iter(event.summarized))
    why = await store.why("s", "u1")
    assert not why.in_context and why.reason == "summarized"
    assert why.summary_group_id == summary_id and why.event_id == event.id
    assert (await store.why("s", "a3")).in_context
    assert (await store.why("s", "late")).reason == "stale_pending_call"
    assert (await store.why("s", "orphan")).reason == "orphan_result"
    with pytest.raises(InvalidInput):
        await store.why("s", "missing")
    stats = await store.stats("s")
    view = await store.view("s")
    assert stats.stored_messages == len(chat) + 1
    assert (stats.active_messages, stats.active_groups, stats.active_tokens) == (
        view.message_count,
        view.group_count,
        view.token_count,
    )
    assert stats.excluded_messages == view.excluded.messages
    assert stats.events == 1


async def test_excluded_groups_name_event_and_summary(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    summary = await store.compact("s", SummarizeOldest(2))
    assert summary is not None
    ((summary_group, replaced),) = summary.summarized.items()
    excluded = await store.excluded("s")
    assert [g.group_id for g in excluded] == list(replaced)
    for group in excluded:
        assert group.reason == "summarized" and group.event_id == summary.id
        assert group.summary_group_id == summary_group
        assert group.excluded_at == summary.created_at


async def test_unknown_session_and_message(store: HistoryBackend) -> None:
    for read in (
        store.audit("missing"),
        store.excluded("missing"),
        store.why("missing", "m"),
        store.stats("missing"),
    ):
        with pytest.raises(SessionNotFound):
            await read
    await store.append("s", _chat())
    with pytest.raises(InvalidInput):
        await store.why("s", "not-a-message")
    empty = await store.stats()
    assert empty.sessions == 1 and empty.events == 0
