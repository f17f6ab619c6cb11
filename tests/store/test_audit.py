"""Audit reads on the SQL store: events, excluded groups, why, stats."""

from __future__ import annotations

from datetime import timedelta

import pytest

from store import HistoryStore
from store.errors import InvalidInput, SessionNotFound
from store.memory import InMemoryHistoryStore
from tests.conformance.toy_strategies import (
    TOKENIZER,
    ExcludeOldest,
    ReduceResults,
    SummarizeOldest,
)
from tests.memory.test_compaction import _chat
from tests.store.parity import observed


async def _compacted(target: HistoryStore | InMemoryHistoryStore) -> None:
    for session in ("a", "b"):
        await target.append(session, _chat(session))
        await target.compact(session, ReduceResults())
        await target.compact(session, SummarizeOldest(2), phase="after_run")
        await target.compact(session, ExcludeOldest(1))


async def test_audit_orders_and_filters_like_memory(store: HistoryStore) -> None:
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    await _compacted(store)
    await _compacted(memory)
    everything = await store.audit()
    assert len(everything) == 6
    keys = [(e.created_at, e.session_id) for e in everything]
    assert keys == sorted(keys, reverse=True)
    assert [e.strategy for e in everything[:3]] == [e.strategy for e in await store.audit("b")]
    for kwargs in ({"phase": "after_run"}, {"strategy": "exclude_oldest"}, {"limit": 4}):
        mine = [(e.session_id, e.strategy, e.phase) for e in await store.audit(**kwargs)]
        theirs = [(e.session_id, e.strategy, e.phase) for e in await memory.audit(**kwargs)]
        assert mine == theirs
    newest = everything[0].created_at
    assert await store.audit(since=newest + timedelta(seconds=1)) == []
    assert [e.id for e in await store.audit(since=newest)] == [everything[0].id]
    with pytest.raises(InvalidInput):
        await store.audit(limit=-1)


async def test_stats_excluded_and_why_match_memory(store: HistoryStore) -> None:
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    await _compacted(store)
    await _compacted(memory)
    for session in ("a", "b"):
        assert await observed(store, session) == await observed(memory, session)
        for stored in await memory.history(session, include_excluded=True):
            mine = await store.why(session, stored.message_id)
            theirs = await memory.why(session, stored.message_id)
            assert mine.model_dump(exclude={"event_id", "explanation"}) == theirs.model_dump(
                exclude={"event_id", "explanation"}
            )
            assert (mine.event_id is None) == (theirs.event_id is None)
    tenant = await store.stats()
    assert tenant.model_dump() == (await memory.stats()).model_dump()
    assert tenant.sessions == 2 and tenant.events == 6
    assert tenant.excluded_messages > 0


async def test_excluded_groups_name_event_and_summary(store: HistoryStore) -> None:
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


async def test_unknown_session_and_message(store: HistoryStore) -> None:
    for call in (
        store.audit("missing"),
        store.excluded("missing"),
        store.why("missing", "m"),
        store.stats("missing"),
    ):
        with pytest.raises(SessionNotFound):
            await call
    await store.append("s", _chat())
    with pytest.raises(InvalidInput):
        await store.why("s", "not-a-message")
    empty = await store.stats()
    assert empty.sessions == 1 and empty.events == 0
