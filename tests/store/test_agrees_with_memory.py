"""The SQL store against the in-memory model: the same scenario gives the same answers.

Each test runs one scenario on the SQL store and on an
:class:`~store.memory.InMemoryHistoryStore` and compares everything a user can see
(:func:`tests.store.parity.observed`). What every backend must do is stated once in
``tests/conformance/``; these scenarios check that the two agree on the paths where
their code differs most (write-back through the mirror, late results, nested restores).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidInput
from store.formats import from_agent_framework
from store.memory import InMemoryHistoryStore
from tests.conformance.test_compaction import _chat
from tests.conformance.test_import import _reference_history
from tests.conformance.test_library_strategies import STRATEGIES, restore_unpin_compact
from tests.conformance.test_restore import _chat as _restore_chat
from tests.conformance.toy_strategies import (
    TOKENIZER,
    ExcludeOldest,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, reasoning, result, system, tool, user
from tests.store.parity import observed
from tests.store.test_compaction_rows import STEPS, _step


def _merging_chat() -> list[Any]:
    return [
        system("sys", "be brief"),
        user("u1", "two lookups"),
        assistant("r1", reasoning("thinking")),
        assistant("a1", call("c1", "one")),
        assistant("a2", call("c2", "two")),
        user("u2", "next"),
        assistant("b1", "ok"),
    ]


@pytest.mark.parametrize(
    "late",
    [
        [tool("t12", result("c1", "r1"), result("c2", "r2"))],
        [tool("t1", result("c1", "r1")), tool("t2", result("c2", "r2"))],
    ],
)
async def test_pending_and_late_results_with_excluded_groups_match_memory(
    store: HistoryStore, late: list[Any]
) -> None:
    """Late results joining (and merging) excluded and active groups, as memory does."""
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        await target.append("s", _merging_chat())
        await target.compact("s", ExcludeOldest(2))
    assert await store.context("s", pending=late) == await memory.context("s", pending=late)
    for target in (store, memory):
        await target.append("s", late)
    assert await observed(store, "s") == await observed(memory, "s")


async def test_same_outcome_as_the_memory_store_step_by_step(store: HistoryStore) -> None:
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for step in STEPS:
        await _step(store, step)
        await _step(memory, step)
        assert await observed(store, "s") == await observed(memory, "s"), step


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


async def test_restores_match_memory(store: HistoryStore) -> None:
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        await target.append("s", _restore_chat())
        await target.compact("s", ReduceResults())
        await target.compact("s", SummarizeOldest(2))
        await target.compact("s", SummarizeOldest(2))  # nests the first summary
        await target.compact("s", ExcludeOldest(1))
    assert await observed(store, "s") == await observed(memory, "s")
    for index in (-1, 0):
        for target in (store, memory):
            excluded = await target.excluded("s")
            await target.restore("s", group_ids=[excluded[index].group_id])
        assert await observed(store, "s") == await observed(memory, "s")
    for target in (store, memory):
        oldest = (await target.audit("s"))[-1]
        await target.restore("s", event_id=oldest.id)
    assert await observed(store, "s") == await observed(memory, "s")


async def test_import_matches_memory_and_is_idempotent(store: HistoryStore) -> None:
    messages = from_agent_framework(await asyncio.to_thread(_reference_history))
    memory = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for target in (store, memory):
        result = await target.import_messages("s", messages)
        assert result.event is not None and result.event.strategy == "import:agent_framework"
        again = await target.import_messages("s", messages)
        assert again.event is None
    assert await observed(store, "s") == await observed(memory, "s")
    imported = await store.history("s", include_excluded=True)
    assert {m.source_system for m in imported} == {"agent_framework"}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
async def test_the_sql_store_agrees_with_the_model(store: HistoryStore, name: str) -> None:
    model = InMemoryHistoryStore(tokenizer=TOKENIZER)
    for s in (store, model):
        await restore_unpin_compact(s, STRATEGIES[name]())
    assert await observed(store, "s") == await observed(model, "s")
